#include "vmm/machine/config_parts.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include <fmt/format.h>

#include "vmm/devices/virtio/net/net.h"

namespace dsec::machine {
namespace {

// A PARTUUID as the kernel's root= takes it: hex digits and dashes (an MBR disk's
// "SSSSSSSS-PP", a GPT partition's GUID). Nothing else may reach the command line.
bool is_partuuid(const std::string& text) {
  return !text.empty() && text.size() <= 36 && std::ranges::all_of(text, [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
}

}  // namespace

Status check_vm_file(const std::string& path, const std::string& what, bool block_device) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return fail_errno(what + " " + path, errno,
                      errno == ENOENT ? "check the path" : "check its permissions");
  }
  if (S_ISREG(st.st_mode) || (block_device && S_ISBLK(st.st_mode))) {
    return ok();
  }
  return fail(
      what + " " + path +
      (block_device ? " is neither a regular file nor a block device" : " is not a regular file"));
}

Status check_vsock(const VsockConfig& v) {
  if (v.guest_cid < 3 || v.guest_cid > 0xfffffffeULL) {
    return fail("vsock guest CID " + std::to_string(v.guest_cid) + " is reserved or out of range",
                "give a CID from 3 to 4294967294");
  }
  if (v.uds_path.empty()) {
    return fail("vsock needs the path of the Unix socket to create");
  }
  struct stat st {};
  if (::lstat(v.uds_path.c_str(), &st) == 0) {
    return fail("vsock socket " + v.uds_path + " already exists",
                "remove it (a VM that ended leaves its socket behind) or choose another path");
  }
  return ok();
}

Status check_drives(const std::vector<DriveConfig>& drives) {
  const DriveConfig* root = nullptr;
  for (const auto& drive : drives) {
    DSEC_TRY(check_vm_file(drive.path, "drive", /*block_device=*/true));
    if (drive.is_root) {
      if (root != nullptr) {
        return fail("two root drives: " + root->path + " and " + drive.path,
                    "make one drive the root file system");
      }
      root = &drive;
    }
    if (!drive.partuuid.empty() && !is_partuuid(drive.partuuid)) {
      return fail(
          "drive " + drive.path + ": partuuid '" + drive.partuuid + "' is not a partition UUID",
          "give hex digits and dashes, as blkid prints PARTUUID");
    }
  }
  return ok();
}

Status check_net(const NetConfig& n) {
  if (n.tap_fd >= 0 && (!n.tap.empty() || !n.host_cidr.empty())) {
    return fail("--net fd=" + std::to_string(n.tap_fd) +
                    " is a TAP handed in: it takes no "
                    "tap= or host=",
                "name and address the TAP where it was opened");
  }
  if (n.tap.empty() && n.tap_fd < 0) {
    return fail("--net needs the TAP's name", "give tap=NAME, or fd=N for a TAP handed in");
  }
  if (n.tap.size() > 15) {
    return fail("TAP name '" + n.tap + "' is longer than 15 bytes");
  }
  if (!n.host_cidr.empty()) {
    if (auto cidr = virtio::parse_ipv4_cidr(n.host_cidr); !cidr) {
      return std::unexpected(cidr.error().with_context("--net host="));
    }
  }
  if (!n.mac.empty()) {
    if (auto mac = virtio::parse_mac(n.mac); !mac) {
      return std::unexpected(mac.error().with_context("guest MAC"));
    }
  }
  return ok();
}

Status check_nets(const std::vector<NetConfig>& nets) {
  for (size_t i = 0; i < nets.size(); ++i) {
    const NetConfig& n = nets[i];
    if (auto checked = check_net(n); !checked) {
      return std::unexpected(
          checked.error().with_context("network interface '" + n.iface_id() + "'"));
    }
    for (size_t j = 0; j < i; ++j) {
      const NetConfig& other = nets[j];
      const auto clash = [&](const std::string& what, const std::string& value) {
        return fail(fmt::format("network interfaces '{}' and '{}' have the same {} {}",
                                other.iface_id(), n.iface_id(), what, value),
                    "give each interface its own " + what);
      };
      if (n.iface_id() == other.iface_id()) {
        return clash("iface_id", n.iface_id());
      }
      if (!n.tap.empty() && n.tap == other.tap) {
        return clash("TAP", n.tap);
      }
      // Compared as addresses: "06:00:AC:..." and "06:00:ac:..." are one MAC.
      // (check_net parsed both.)
      if (virtio::parse_mac(n.guest_mac(i)).value() ==
          virtio::parse_mac(other.guest_mac(j)).value()) {
        return clash("guest MAC", n.guest_mac(i));
      }
    }
  }
  return ok();
}

std::string NetConfig::guest_mac(size_t index) const {
  if (!mac.empty()) {
    return mac;
  }
  // kDefaultGuestMac's last byte is 0x56; the slots end long before it could wrap.
  return fmt::format("52:54:00:12:34:{:02x}", (0x56 + index) & 0xff);
}

std::string guest_drive_name(size_t index) {
  // Linux names virtio disks vda..vdz, then vdaa..vdzz (the drives' slots stop far sooner).
  std::string suffix;
  for (size_t n = index + 1; n > 0; n = (n - 1) / 26) {
    suffix.insert(suffix.begin(), static_cast<char>('a' + (n - 1) % 26));
  }
  return "vd" + suffix;
}

}  // namespace dsec::machine
