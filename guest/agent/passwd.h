// The guest's user accounts, read from /etc/passwd itself: the agent is a static binary,
// where getpwnam() would need NSS modules loaded at run time.
#pragma once

#include <sys/types.h>

#include <string>

#include "vmm/common/error.h"

namespace dsec::agent {

struct UserAccount {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
  std::string shell;
};

// The account named `name` in the passwd file at `path`; an Error naming the user when
// there is none (or the file cannot be read).
Result<UserAccount> lookup_user(const std::string& name, const std::string& path = "/etc/passwd");

}  // namespace dsec::agent
