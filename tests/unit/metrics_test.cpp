// Firecracker's metrics as this VMM writes them: counters reported as what moved since the
// previous line, device sections with Firecracker's names, and a sink that takes a line
// per flush and never blocks on a FIFO nobody reads.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/machine_backend.h"
#include "vmm/common/metric_counter.h"
#include "vmm/common/metrics_sink.h"
#include "vmm/devices/device_metrics.h"

namespace dsec {
namespace {

using nlohmann::json;

std::vector<json> json_lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(json::parse(line));
  }
  return lines;
}

TEST(MetricCounterTest, ReportsWhatWasCountedSinceTheLastReport) {
  MetricCounter counter;
  counter.add(5);
  counter.inc();
  EXPECT_EQ(counter.take_since_last_report(), 6u);
  EXPECT_EQ(counter.take_since_last_report(), 0u);
  counter.add(3);
  EXPECT_EQ(counter.take_since_last_report(), 3u);
  EXPECT_EQ(counter.total(), 9u);
}

TEST(DeviceMetricsTest, WritesFirecrackersSectionsPerDeviceAndTheirSum) {
  devices::DeviceMetrics metrics;
  auto root = std::make_shared<devices::BlockMetrics>();
  auto data = std::make_shared<devices::BlockMetrics>();
  metrics.drives = {{"rootfs", root}, {"data", data}};
  metrics.entropy = std::make_shared<devices::EntropyMetrics>();
  root->read_count.add(2);
  root->read_bytes.add(8192);
  data->read_count.inc();
  data->read_bytes.add(512);
  data->write_count.inc();
  data->write_bytes.add(4096);
  metrics.entropy->entropy_bytes.add(64);

  json report;
  metrics.take_report(report);
  EXPECT_EQ(report["block_rootfs"]["read_count"], 2);
  EXPECT_EQ(report["block_rootfs"]["read_bytes"], 8192);
  EXPECT_EQ(report["block_data"]["write_bytes"], 4096);
  EXPECT_EQ(report["block"]["read_count"], 3);
  EXPECT_EQ(report["block"]["read_bytes"], 8704);
  EXPECT_EQ(report["block"]["write_count"], 1);
  EXPECT_EQ(report["entropy"]["entropy_bytes"], 64);
  // Devices the VM does not have get no section.
  EXPECT_FALSE(report.contains("net"));
  EXPECT_FALSE(report.contains("vsock"));

  // The next report has what moved since: nothing, then one more write.
  json quiet;
  metrics.take_report(quiet);
  EXPECT_EQ(quiet["block"]["read_bytes"], 0);
  data->write_count.inc();
  json next;
  metrics.take_report(next);
  EXPECT_EQ(next["block"]["write_count"], 1);
  EXPECT_EQ(next["block_data"]["write_count"], 1);
  EXPECT_EQ(next["block_rootfs"]["write_count"], 0);
}

TEST(MetricsSinkTest, AFileGetsOneLinePerWrite) {
  test::TempDir dir;
  const auto path = dir.file("metrics.json");
  ASSERT_OK_AND_ASSIGN(MetricsSink sink, MetricsSink::open(path));
  ASSERT_OK(sink.write_line(R"({"a":1})"));
  ASSERT_OK(sink.write_line(R"({"a":2})"));
  const auto lines = json_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["a"], 2);
}

TEST(MetricsSinkTest, AFifoWithoutAReaderNeitherBlocksTheOpenNorTheWrites) {
  test::TempDir dir;
  const auto path = dir.file("metrics.fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  ASSERT_OK_AND_ASSIGN(MetricsSink sink, MetricsSink::open(path));
  // Lines until the FIFO is full: then a write fails at once instead of waiting.
  const std::string line(1000, 'x');
  Status written = ok();
  int lines = 0;
  for (; lines < 10000 && written; ++lines) {
    written = sink.write_line(line);
  }
  ASSERT_FALSE(written.has_value()) << "a FIFO holds far less than 10 MB";
  EXPECT_THAT(written.error().message(), ::testing::HasSubstr("FIFO is full"));
  // A reader then finds whole lines.
  const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  std::string first(line.size() + 1, '\0');
  EXPECT_EQ(::read(reader, first.data(), first.size()), static_cast<ssize_t>(first.size()));
  EXPECT_EQ(first, line + "\n");
  ::close(reader);
}

TEST(MetricsSinkTest, APathThatCannotBeOpenedIsAnErrorThatNamesIt) {
  const auto sink = MetricsSink::open("/nonexistent-dir/metrics");
  ASSERT_FALSE(sink.has_value());
  EXPECT_THAT(sink.error().message(), ::testing::HasSubstr("/nonexistent-dir/metrics"));
}

// PUT /metrics and FlushMetrics on a VMM without a VM yet: each flush is one line with
// Firecracker's timestamp.
TEST(MachineBackendMetricsTest, EachFlushWritesOneTimestampedLine) {
  test::TempDir dir;
  const auto path = dir.file("metrics.json");
  api::MachineBackend backend(api::MachineBackend::LoadSettings{});
  const auto unconfigured = backend.flush_metrics();
  ASSERT_FALSE(unconfigured.has_value());
  EXPECT_THAT(unconfigured.error().message(), ::testing::HasSubstr("PUT /metrics"));

  ASSERT_OK(backend.configure_metrics(path));
  EXPECT_FALSE(backend.configure_metrics(path).has_value()) << "configured once only";
  ASSERT_OK(backend.flush_metrics());
  ASSERT_OK(backend.flush_metrics());
  const auto lines = json_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const auto& line : lines) {
    ASSERT_TRUE(line.contains("utc_timestamp_ms"));
    EXPECT_LE(line["utc_timestamp_ms"].get<int64_t>(), now_ms);
    EXPECT_GT(line["utc_timestamp_ms"].get<int64_t>(), now_ms - 3600 * 1000);
  }
}

}  // namespace
}  // namespace dsec
