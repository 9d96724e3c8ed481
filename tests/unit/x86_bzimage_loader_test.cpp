// Loading a bzImage through the 64-bit boot protocol, and refusing the ones it cannot boot.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/result_matchers.h"
#include "tests/unit/x86_kernel_images.h"
#include "vmm/arch/x86_64/kernel_loader.h"
#include "vmm/arch/x86_64/layout.h"

namespace dsec::x86_64 {
namespace {

using test::BzImageOptions;
using test::make_bzimage;
using ::testing::AllOf;
using ::testing::HasSubstr;

GuestMemory make_memory(uint64_t bytes = 64 * kMiB) {
  return std::move(GuestMemory::anonymous(ram_regions(bytes).value()).value());
}

std::string load_error(GuestMemory& memory, const std::vector<uint8_t>& image) {
  const auto kernel = load_kernel(memory, image);
  return kernel.has_value() ? std::string("loaded") : kernel.error().message();
}

TEST(X86BzImageLoader, LoadsTheProtectedModeCodeAtOneMiB) {
  GuestMemory memory = make_memory();
  const BzImageOptions options{.init_size = 0x800000, .cmdline_size = 255};
  const auto image = make_bzimage(options);
  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel(memory, image));
  EXPECT_EQ(kernel.protocol, BootProtocol::kLinux64);
  EXPECT_EQ(kernel.entry, kMiB + 0x200);
  // The kernel claims init_size, more than its file bytes, to decompress in place.
  EXPECT_EQ(kernel.extent, (GuestRange{kMiB, 0x800000}));
  EXPECT_EQ(kernel.cmdline_max, 255u);
  EXPECT_EQ(kernel.initrd_addr_max, 0x7fffffffu);
  ASSERT_TRUE(kernel.setup.has_value());
  EXPECT_EQ(+kernel.setup->version, 0x020f);
  EXPECT_EQ(+kernel.setup->init_size, 0x800000u);
  EXPECT_EQ(+kernel.setup->xloadflags, XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G);

  const size_t setup_bytes = 5 * 512;
  std::vector<uint8_t> loaded(image.size() - setup_bytes);
  ASSERT_OK(memory.read(kMiB, loaded));
  EXPECT_EQ(loaded, std::vector<uint8_t>(image.begin() + setup_bytes, image.end()));
}

TEST(X86BzImageLoader, SetupSectsZeroMeansFour) {
  GuestMemory memory = make_memory();
  const auto image = make_bzimage({.setup_sects = 0});
  ASSERT_OK(load_kernel(memory, image));
  ASSERT_OK_AND_ASSIGN(const uint8_t first, memory.read_obj<uint8_t>(kMiB));
  EXPECT_EQ(first, image[5 * 512]);
}

TEST(X86BzImageLoader, CopiesOnlyTheHeaderTheKernelDeclares) {
  GuestMemory memory = make_memory();
  auto image = make_bzimage();
  test::put<uint32_t>(image, 0x1f1 + offsetof(setup_header, kernel_info_offset), 0x1234);
  // A header declared to end at 0x264 keeps init_size (0x260) but not kernel_info_offset
  // (0x268), which the zero page must then show as zero.
  image[0x201] = 0x62;
  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel(memory, image));
  EXPECT_EQ(+kernel.setup->init_size, 64u * 1024);
  EXPECT_EQ(+kernel.setup->kernel_info_offset, 0u);
}

TEST(X86BzImageLoader, BadMagicIsNotABzImage) {
  GuestMemory memory = make_memory();
  auto image = make_bzimage();
  std::memcpy(image.data() + 0x202, "HdrX", 4);
  EXPECT_THAT(load_error(memory, image), AllOf(HasSubstr("not a bzImage or ELF vmlinux"),
                                               HasSubstr("\"HdrS\" at offset 0x202")));
  auto bad_flag = make_bzimage();
  test::put<uint16_t>(bad_flag, 0x1fe, 0x1234);
  EXPECT_THAT(load_error(memory, bad_flag), HasSubstr("bzImage: boot_flag is 0x1234, not 0xaa55"));
}

TEST(X86BzImageLoader, BootProtocolOlderThan212IsRefused) {
  GuestMemory memory = make_memory();
  EXPECT_THAT(load_error(memory, make_bzimage({.version = 0x020b})),
              HasSubstr("bzImage: boot protocol 2.11 is older than 2.12"));
  EXPECT_THAT(load_error(memory, make_bzimage({.version = 0x0202})), HasSubstr("protocol 2.02"));
  EXPECT_TRUE(load_kernel(memory, make_bzimage({.version = 0x020c})).has_value());
}

TEST(X86BzImageLoader, KernelWithout64BitEntryIsRefused) {
  GuestMemory memory = make_memory();
  const auto error = load_kernel(memory, make_bzimage({.xloadflags = XLF_CAN_BE_LOADED_ABOVE_4G}));
  ASSERT_FALSE(error.has_value());
  EXPECT_THAT(error.error().message(),
              AllOf(HasSubstr("no 64-bit entry point (XLF_KERNEL_64 is not set)"),
                    HasSubstr("build the kernel for x86-64")));
  EXPECT_THAT(load_error(memory, make_bzimage({.loadflags = 0})), HasSubstr("LOADED_HIGH"));
}

TEST(X86BzImageLoader, SetupSectorsBeyondTheFileAreRefused) {
  GuestMemory memory = make_memory();
  auto image = make_bzimage({.payload_size = 1024});
  image[0x1f1] = 200;  // setup_sects: 201 * 512 bytes, far more than the file
  EXPECT_THAT(load_error(memory, image),
              HasSubstr("setup code of 200 sectors (102912 bytes) leaves nothing of the 3584-byte "
                        "file"));
}

TEST(X86BzImageLoader, TruncatedSetupHeaderIsRefused) {
  GuestMemory memory = make_memory();
  auto image = make_bzimage();
  image.resize(0x210);  // "HdrS" is there, the rest of the header is not
  EXPECT_THAT(load_error(memory, image), HasSubstr("bzImage: the file has 528 bytes, too few"));
}

TEST(X86BzImageLoader, PayloadShorterThanSyssizeIsRefused) {
  GuestMemory memory = make_memory();
  auto image = make_bzimage({.payload_size = 4096});
  image.resize(image.size() - 1024);  // cut in the middle of the protected-mode code
  EXPECT_THAT(load_error(memory, image),
              HasSubstr("bzImage: the file is truncated: its header declares 4096 bytes of "
                        "kernel after the 2560 bytes of setup code, but only 3072 follow"));
  // Bytes after the declared code (a signature, say) are allowed.
  image = make_bzimage({.payload_size = 4096});
  image.resize(image.size() + 512, 0);
  ASSERT_OK(load_kernel(memory, image));
}

TEST(X86BzImageLoader, KernelLargerThanRamIsRefused) {
  GuestMemory memory = make_memory(16 * kMiB);
  EXPECT_THAT(load_error(memory, make_bzimage({.init_size = 0x2000000})),
              HasSubstr("does not fit in the guest's 16 MiB of RAM"));
  EXPECT_THAT(load_error(memory, make_bzimage({.init_size = 0xffffffff})), HasSubstr("MMIO gap"));
}

// The Debian kernel the KVM test bed boots: a real bzImage, parsed only. It is where the
// harness keeps it (`tools/kvm-harness kernel-path`, which fetches it once where it is
// missing); a harness that cannot say fails the test, never skips it.
TEST(X86BzImageLoader, ParsesTheDebianStockKernel) {
  const std::string command = "'" + dsec::test::source_path("/tools/kvm-harness") + "' kernel-path";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command << ": " << std::strerror(errno);
  std::string path;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr) {
    path += buffer.data();
  }
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << command << " failed (its message is above): " << path;
  while (!path.empty() && path.back() == '\n') {
    path.pop_back();
  }
  ASSERT_TRUE(std::filesystem::is_regular_file(path)) << command << " printed '" << path << "'";
  GuestMemory memory = make_memory(512 * kMiB);
  ASSERT_OK_AND_ASSIGN(const LoadedKernel kernel, load_kernel_file(memory, path));
  EXPECT_EQ(kernel.protocol, BootProtocol::kLinux64);
  EXPECT_EQ(kernel.entry, kMiB + 0x200);
  ASSERT_TRUE(kernel.setup.has_value());
  EXPECT_GE(+kernel.setup->version, 0x020c);
  EXPECT_NE(+kernel.setup->xloadflags & XLF_KERNEL_64, 0);
  EXPECT_EQ(kernel.extent.base, kMiB);
  EXPECT_GE(kernel.extent.size, uint64_t{kernel.setup->init_size});
  EXPECT_GT(kernel.cmdline_max, 255u);
  EXPECT_LE(kernel.cmdline_max, kCmdlineMaxSize - 1);
}

}  // namespace
}  // namespace dsec::x86_64
