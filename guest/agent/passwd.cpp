#include "guest/agent/passwd.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <vector>

namespace dsec::agent {
namespace {

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t colon = line.find(':', start);
    fields.push_back(line.substr(start, colon - start));
    if (colon == std::string::npos) {
      return fields;
    }
    start = colon + 1;
  }
}

bool parse_id(const std::string& text, unsigned& out) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

Result<UserAccount> lookup_user(const std::string& name, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return fail_errno("cannot read " + path + " to find the user '" + name + "'", errno);
  }
  std::string line;
  bool malformed = false;
  while (std::getline(in, line)) {
    const auto f = split_fields(line);
    if (f.size() != 7 || f[0] != name) {
      continue;
    }
    unsigned uid = 0, gid = 0;
    if (!parse_id(f[2], uid) || !parse_id(f[3], gid)) {
      malformed = true;
      break;
    }
    return UserAccount{f[0], uid, gid, f[5].empty() ? "/" : f[5], f[6]};
  }
  if (malformed) {
    return fail("the entry of user '" + name + "' in " + path + " has no numeric uid and gid");
  }
  return fail("no user '" + name + "' in the guest (" + path + ")",
              "name an account of the guest's image, or none to run as the agent's user");
}

namespace {

// name:x:id:... lines of a passwd or group file, by id.
void read_names(const char* path, std::map<unsigned, std::string>& out) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_fields(line);
    unsigned id = 0;
    if (f.size() >= 3 && parse_id(f[2], id)) {
      out.emplace(id, f[0]);
    }
  }
}

}  // namespace

void AccountNames::load() {
  if (!loaded_) {
    read_names("/etc/passwd", users_);
    read_names("/etc/group", groups_);
    loaded_ = true;
  }
}

std::string AccountNames::user(uid_t uid) {
  load();
  const auto it = users_.find(uid);
  return it != users_.end() ? it->second : std::to_string(uid);
}

std::string AccountNames::group(gid_t gid) {
  load();
  const auto it = groups_.find(gid);
  return it != groups_.end() ? it->second : std::to_string(gid);
}

}  // namespace dsec::agent
