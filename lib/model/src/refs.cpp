#include "gatos/model/refs.h"

#include <cstring>

#include "gatos/model/encoding.h"

namespace gatos {

std::string JobRef(std::string_view job_hex, std::string_view leaf) {
  std::string r = kJobsPrefix;
  r += job_hex;
  r += '/';
  r += leaf;
  return r;
}

std::string ClaimRef(std::string_view job_hex, std::string_view worker_hex) {
  return JobRef(job_hex, "claims/" + std::string(worker_hex));
}

std::string AttemptRef(std::string_view job_hex, int64_t n) {
  return JobRef(job_hex, "attempts/" + std::to_string(n));
}

bool SplitJobRef(std::string_view ref, std::string* job_hex, std::string* leaf) {
  const size_t plen = std::strlen(kJobsPrefix);
  if (ref.size() < plen + 66 || ref.compare(0, plen, kJobsPrefix) != 0 || ref[plen + 64] != '/') {
    return false;
  }
  std::string_view hex = ref.substr(plen, 64);
  if (!IsLowerHex(hex, 64)) return false;
  *job_hex = std::string(hex);
  *leaf = std::string(ref.substr(plen + 65));
  return true;
}

}  // namespace gatos
