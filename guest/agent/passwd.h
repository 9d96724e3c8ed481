// The guest's user accounts, read from /etc/passwd itself: the agent is a static binary,
// where getpwnam() would need NSS modules loaded at run time.
#pragma once

#include <sys/types.h>

#include <map>
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

// Names of the guest's users and groups by id, read once from /etc/passwd and /etc/group
// (a listing asks for many); an id with no name is given as its digits.
class AccountNames {
 public:
  std::string user(uid_t uid);
  std::string group(gid_t gid);

 private:
  void load();

  bool loaded_ = false;
  std::map<unsigned, std::string> users_, groups_;
};

}  // namespace dsec::agent
