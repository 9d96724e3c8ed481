// multipart/form-data bodies (RFC 7578), as E2B's SDKs upload files to envd's POST /files:
// each part's form name, its filename and its bytes. Hostile-input safe: a boundary that is
// missing or too long, a part without its headers' end, or a body without its closing
// delimiter is refused, saying which.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vmm/common/error.h"

namespace dsec::e2b {

struct FormPart {
  std::string name;
  std::string filename;
  std::string data;
};

// The boundary a Content-Type of multipart/form-data names.
Result<std::string> multipart_boundary(std::string_view content_type);
Result<std::vector<FormPart>> parse_multipart(std::string_view body, std::string_view boundary);

}  // namespace dsec::e2b
