// The VMM's log on stderr stays within --log-limit: lines up to it pass, then one that says
// so, then none, whatever more is logged.
#include "vmm/common/capped_log_sink.h"

#include <gtest/gtest.h>
#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <string>

namespace dsec {
namespace {

struct CappedLog {
  std::ostringstream out;
  std::shared_ptr<CappedLogSink> capped =
      std::make_shared<CappedLogSink>(std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  spdlog::logger logger{"", capped};
  CappedLog() { logger.set_pattern("%v"); }
};

TEST(CappedLogSink, LinesPassUpToTheLimitThenOneSaysSoAndNoMore) {
  CappedLog log;
  log.capped->set_limit(1000);
  const std::string line(64, 'x');  // "i xxx...": 102 bytes counted a line below 10
  for (int i = 0; i < 1000; ++i) {
    log.logger.info("{} {}", i, line);
  }
  const std::string text = log.out.str();
  EXPECT_NE(text.find("8 xxx"), std::string::npos) << "the first nine lines pass (918 bytes)";
  EXPECT_EQ(text.find("9 xxx"), std::string::npos) << "the tenth would pass the limit";
  EXPECT_NE(text.find("reached its limit (1000 bytes, --log-limit)"), std::string::npos) << text;
  EXPECT_LE(text.size(), 1000U + 200U);
  EXPECT_TRUE(log.capped->capped());
}

TEST(CappedLogSink, NoLimitPassesEverything) {
  CappedLog log;
  for (int i = 0; i < 1000; ++i) {
    log.logger.info("line {}", i);
  }
  EXPECT_NE(log.out.str().find("line 999"), std::string::npos);
  EXPECT_FALSE(log.capped->capped());
}

TEST(CappedLogSink, ALimitSetLaterCountsWhatWasWrittenBefore) {
  CappedLog log;
  const std::string line(64, 'y');
  for (int i = 0; i < 5; ++i) {
    log.logger.info("{}", line);  // 100 bytes each, counted
  }
  log.capped->set_limit(600);
  log.logger.info("{}", line);  // 600: still within
  log.logger.info("{}", line);  // 700: past it
  const std::string text = log.out.str();
  EXPECT_NE(text.find("reached its limit (600 bytes"), std::string::npos) << text;
  EXPECT_TRUE(log.capped->capped());
}

}  // namespace
}  // namespace dsec
