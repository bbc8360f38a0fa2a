#include "gatos/scan/fingerprint.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gatos/model/encoding.h"

namespace gatos::scan {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return UnavailableError("writing fingerprint key " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return OkStatus();
}

}  // namespace

Result<Digest32> ReadFingerprintKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return NotFoundError("fingerprint key file " + path + " does not exist or is unreadable");
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  Digest32 key{};
  if (text.size() == key.size()) {
    std::memcpy(key.data(), text.data(), key.size());
    return key;
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (IsLowerHex(text, 64)) {
    Result<Bytes> raw = HexDecode(text);
    if (raw.ok() && raw->size() == key.size()) {
      std::memcpy(key.data(), raw->data(), key.size());
      return key;
    }
  }
  return InvalidArgumentError("fingerprint key file " + path +
                              " must hold exactly 32 raw bytes or 64 lowercase hex characters "
                              "(create one with: head -c32 /dev/urandom | od -An -tx1 | tr -d ' "
                              "\\n' > FILE)");
}

Result<Digest32> LoadOrCreateFingerprintKey(const std::string& path, bool* created) {
  if (created) *created = false;
  Result<Digest32> existing = ReadFingerprintKey(path);
  if (existing.ok() || existing.status().code() != StatusCode::kNotFound) return existing;

  Digest32 key{};
  size_t got = 0;
  while (got < key.size()) {
    ssize_t n = ::getrandom(key.data() + got, key.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return InternalError(std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  // Write a private temp file, then link(2) it into place: link fails if
  // another process won the race, and then its key is the one to use.
  // The suffix is random, not the pid: jobs in separate PID namespaces
  // (bubblewrap) share one state directory and often have the same pid.
  uint8_t nonce[8];
  for (size_t n = 0; n < sizeof nonce;) {
    ssize_t k = ::getrandom(nonce + n, sizeof nonce - n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return InternalError(std::string("getrandom failed: ") + std::strerror(errno));
    n += static_cast<size_t>(k);
  }
  const std::string tmp = path + ".tmp." + HexEncode(nonce, sizeof nonce);
  {
    Fd f;
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f.fd < 0) {
      return UnavailableError("creating fingerprint key " + tmp + ": " + std::strerror(errno) +
                              " (check the state directory is writable)");
    }
    ::fchmod(f.fd, 0600);
    GATOS_RETURN_IF_ERROR(WriteAll(f.fd, HexEncode(key.data(), key.size()) + "\n", tmp));
    if (::fsync(f.fd) != 0) {
      return UnavailableError("syncing fingerprint key " + tmp + ": " + std::strerror(errno));
    }
  }
  int rc = ::link(tmp.c_str(), path.c_str());
  int link_errno = errno;
  ::unlink(tmp.c_str());
  if (rc != 0) {
    if (link_errno == EEXIST) return ReadFingerprintKey(path);
    return UnavailableError("installing fingerprint key " + path + ": " +
                            std::strerror(link_errno));
  }
  if (created) *created = true;
  return key;
}

std::string Fingerprint(const Digest32& key, std::string_view secret) {
  Blake3Hasher h(key);
  h.Update(secret);
  return "blake3k:" + DigestHex(h.Finalize());
}

}  // namespace gatos::scan
