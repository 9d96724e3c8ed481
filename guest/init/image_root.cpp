#include "guest/init/image_root.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace dsec::init {
namespace {

// Where the pieces go in the initramfs; once the root is switched they are out of sight.
constexpr const char* kLower = "/image";
constexpr const char* kUpperMount = "/overlay";
constexpr const char* kUpper = "/overlay/upper";
constexpr const char* kWork = "/overlay/work";
constexpr const char* kNewRoot = "/newroot";

Status make_dir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return fail_errno("mkdir " + path, errno);
  }
  return ok();
}

Status mount_at(const std::string& source, const std::string& target, const char* type,
                unsigned long flags, const char* data, const char* hint) {
  DSEC_TRY(make_dir(target, 0755));
  if (::mount(source.c_str(), target.c_str(), type, flags, data) != 0) {
    return fail_errno("mount " + source + " (" + (type ? type : "move") + ") on " + target, errno,
                      hint);
  }
  return ok();
}

}  // namespace

ImageRoot parse_image_root(const std::vector<std::string>& args) {
  ImageRoot root;
  for (const auto& arg : args) {
    if (arg.starts_with("dsec.root=")) {
      root.device = arg.substr(10);
    } else if (arg.starts_with("dsec.rootfstype=")) {
      root.fstype = arg.substr(16);
    } else if (arg.starts_with("dsec.upper=")) {
      root.upper_device = arg.substr(11);
    }
  }
  return root;
}

Status switch_to_image_root(const ImageRoot& root) {
  DSEC_TRY(mount_at(root.device, kLower, root.fstype.c_str(), MS_RDONLY, nullptr,
                    "is the image a file system of that type? (dsec-vmm checks EROFS images)"));
  if (root.upper_device.empty()) {
    DSEC_TRY(mount_at("tmpfs", kUpperMount, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755", nullptr));
  } else {
    DSEC_TRY(mount_at(root.upper_device, kUpperMount, "ext4", MS_NOSUID | MS_NODEV, nullptr,
                      "the scratch disk must hold an ext4 file system"));
  }
  DSEC_TRY(make_dir(kUpper, 0755));
  DSEC_TRY(make_dir(kWork, 0755));
  const std::string layers =
      std::string("lowerdir=") + kLower + ",upperdir=" + kUpper + ",workdir=" + kWork;
  DSEC_TRY(mount_at("overlay", kNewRoot, "overlay", 0, layers.c_str(), nullptr));
  // The early mounts move into the new root; an image without the mount points gets them
  // in its (private) upper layer.
  for (const char* early : {"/dev", "/proc", "/sys", "/tmp"}) {
    DSEC_TRY(mount_at(early, std::string(kNewRoot) + early, nullptr, MS_MOVE, nullptr, nullptr));
  }
  // switch_root: the overlay becomes / (the initramfs cannot be pivot_root'ed away).
  if (::chdir(kNewRoot) != 0) {
    return fail_errno(std::string("chdir ") + kNewRoot, errno);
  }
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) {
    return fail_errno("move the overlay onto /", errno);
  }
  if (::chroot(".") != 0 || ::chdir("/") != 0) {
    return fail_errno("chroot into the overlay", errno);
  }
  // The kernel gives init no PATH; a Debian userland expects the usual one.
  ::setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
  return ok();
}

}  // namespace dsec::init
