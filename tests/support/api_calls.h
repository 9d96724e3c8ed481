// For tests of the API's endpoints: a request as the HTTP connection hands it to VmApi, and
// the fault_message of an answer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "vmm/api/vm_api.h"

namespace dsec::test {

inline http::HttpResponse call(const api::VmApi& vm_api, http::Method method,
                               const std::string& path, const std::string& body = "") {
  http::HttpRequest r;
  r.method = method;
  r.method_text = std::string(http::method_name(method));
  r.path = path;
  r.body = body;
  return vm_api.handle(r);
}

// The answer's fault_message, or a text saying it had none.
inline std::string fault_of(const http::HttpResponse& r) {
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("fault_message") ? j["fault_message"].get<std::string>()
                                                      : "(no fault_message: " + r.body + ")";
}

}  // namespace dsec::test
