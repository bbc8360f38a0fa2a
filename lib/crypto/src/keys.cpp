#include "gatos/crypto/keys.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "gatos/model/encoding.h"
#include "gatos/model/ssh_wire.h"
#include "gatos/sys/file.h"

namespace gatos {
namespace ssh {

Status EnsureSodium() {
  // C++ guarantees thread-safe initialisation of function-local statics.
  static const bool ok = sodium_init() >= 0;
  if (!ok) return InternalError("libsodium initialisation (sodium_init) failed");
  return OkStatus();
}

}  // namespace ssh

namespace {

constexpr std::string_view kPrivateBegin = "-----BEGIN OPENSSH PRIVATE KEY-----";
constexpr std::string_view kPrivateEnd = "-----END OPENSSH PRIVATE KEY-----";
constexpr std::string_view kAuthMagic{"openssh-key-v1\0", 15};
constexpr size_t kPrivateBlockSize = 8;  // cipher "none" block size in OpenSSH
constexpr size_t kMaxKeyText = 64 * 1024;
constexpr size_t kMaxKeyFile = 1024 * 1024;
constexpr size_t kKeyLineWidth = 70;  // ssh-keygen's base64 width

// Wipes a buffer that held secret material when it goes out of scope.
template <typename T>
class Wiper {
 public:
  explicit Wiper(T& buf) : buf_(buf) {}
  ~Wiper() {
    if (!buf_.empty()) sodium_memzero(buf_.data(), buf_.size());
  }
  Wiper(const Wiper&) = delete;
  Wiper& operator=(const Wiper&) = delete;

 private:
  T& buf_;
};

using KeyBytes = std::array<uint8_t, 32>;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view AsView(const Bytes& b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

std::string WrapLines(std::string_view text, size_t width) {
  std::string out;
  out.reserve(text.size() + text.size() / width + 1);
  for (size_t i = 0; i < text.size(); i += width) {
    out.append(text.substr(i, width));
    out.push_back('\n');
  }
  return out;
}

// Creates `path` exclusively with `mode` and writes `data`. AlreadyExists if
// the file exists. Removes the file again if writing fails.
Status WriteNewFile(const std::string& path, std::string_view data, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST) {
      return AlreadyExistsError(path + ": already exists; refusing to overwrite a key file");
    }
    std::string m = path + ": cannot create: " + std::strerror(e);
    return e == ENOENT ? NotFoundError(m) : InternalError(m);
  }
  auto fail = [&](std::string what) {
    int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return InternalError(path + ": " + what + ": " + std::strerror(e));
  };
  // The umask may have cleared bits of `mode`; the mode is part of the contract.
  if (::fchmod(fd, mode) != 0) return fail("chmod failed");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write failed");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync failed");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(path.c_str());
    return InternalError(path + ": close failed: " + std::strerror(e));
  }
  return OkStatus();
}

}  // namespace

Ed25519PrivateKey::~Ed25519PrivateKey() { sodium_memzero(secret_.data(), secret_.size()); }

Ed25519PrivateKey Ed25519PrivateKey::FromSeed(const std::array<uint8_t, 32>& seed,
                                              std::string comment) {
  ssh::EnsureSodium().IgnoreError();  // keypair derivation needs no RNG
  Ed25519PrivateKey key;
  crypto_sign_ed25519_seed_keypair(key.public_key_.bytes.data(), key.secret_.data(), seed.data());
  key.public_key_.comment = std::move(comment);
  randombytes_buf(&key.checkint_, sizeof key.checkint_);
  return key;
}

Result<Ed25519PrivateKey> GenerateEd25519Key(std::string comment) {
  GATOS_RETURN_IF_ERROR(ssh::EnsureSodium());
  Ed25519PrivateKey key;
  crypto_sign_ed25519_keypair(key.public_key_.bytes.data(), key.secret_.data());
  key.public_key_.comment = std::move(comment);
  randombytes_buf(&key.checkint_, sizeof key.checkint_);
  return key;
}

Result<Ed25519PrivateKey> ParseOpenSshPrivateKey(std::string_view pem) {
  GATOS_RETURN_IF_ERROR(ssh::EnsureSodium());
  if (pem.size() > kMaxKeyText) {
    return InvalidArgumentError("private key: input is " + std::to_string(pem.size()) +
                                " bytes, more than the " + std::to_string(kMaxKeyText) +
                                " a key file can be");
  }
  // Armor: BEGIN line, base64 lines, END line; blank lines around it are fine.
  std::string b64;
  Wiper<std::string> b64_wiper(b64);
  enum { kBefore, kBody, kAfter } state = kBefore;
  size_t line_no = 0;
  for (size_t pos = 0; pos <= pem.size();) {
    size_t nl = pem.find('\n', pos);
    if (nl == std::string_view::npos) nl = pem.size();
    std::string_view line = Trim(pem.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (state == kBefore) {
      if (line.empty()) continue;
      if (line != kPrivateBegin) {
        if (line.substr(0, 11) == "-----BEGIN ") {
          return InvalidArgumentError("private key: line " + std::to_string(line_no) +
                                      ": unsupported format \"" + ssh::QuoteForError(line) +
                                      "\"; expected an OpenSSH format key (" +
                                      std::string(kPrivateBegin) + ")");
        }
        return InvalidArgumentError("private key: line " + std::to_string(line_no) +
                                    ": expected \"" + std::string(kPrivateBegin) + "\"");
      }
      state = kBody;
    } else if (state == kBody) {
      if (line == kPrivateEnd) {
        state = kAfter;
      } else {
        b64.append(line);
      }
    } else if (!line.empty()) {
      return InvalidArgumentError("private key: line " + std::to_string(line_no) +
                                  ": unexpected text after \"" + std::string(kPrivateEnd) + "\"");
    }
  }
  if (state == kBefore) {
    return InvalidArgumentError("private key: no \"" + std::string(kPrivateBegin) + "\" line");
  }
  if (state == kBody) {
    return InvalidArgumentError("private key: missing \"" + std::string(kPrivateEnd) +
                                "\" line (truncated file?)");
  }
  auto decoded = Base64Decode(b64);
  if (!decoded.ok()) {
    return InvalidArgumentError("private key: invalid base64 body: " + decoded.status().message());
  }
  Bytes blob = std::move(decoded).value();
  Wiper<Bytes> blob_wiper(blob);

  ssh::WireReader r(AsView(blob), "openssh private key");
  GATOS_ASSIGN_OR_RETURN(std::string_view magic, r.ReadBytes(kAuthMagic.size(), "magic"));
  if (magic != kAuthMagic) return r.Error("bad magic, expected \"openssh-key-v1\"", 0);
  GATOS_ASSIGN_OR_RETURN(std::string_view cipher, r.ReadString("cipher name"));
  GATOS_ASSIGN_OR_RETURN(std::string_view kdf, r.ReadString("kdf name"));
  if (cipher != "none" || kdf != "none") {
    return InvalidArgumentError(
        "encrypted keys are not supported; the key is encrypted with cipher \"" +
        ssh::QuoteForError(cipher) + "\" (kdf \"" + ssh::QuoteForError(kdf) +
        "\"); use a key without a passphrase (ssh-keygen -t ed25519 -N '') or remove the "
        "passphrase from a copy with ssh-keygen -p");
  }
  size_t kdfopt_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view kdf_options, r.ReadString("kdf options"));
  if (!kdf_options.empty()) return r.Error("kdf options must be empty for kdf \"none\"", kdfopt_at);
  size_t nkeys_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(uint32_t nkeys, r.ReadU32("number of keys"));
  if (nkeys != 1) {
    return r.Error("file holds " + std::to_string(nkeys) + " keys; exactly 1 is supported",
                   nkeys_at);
  }
  size_t pub_at = r.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view pub_blob, r.ReadString("public key"));
  ssh::WireReader pr(pub_blob, "openssh private key: public key section");
  GATOS_ASSIGN_OR_RETURN(KeyBytes pub, ssh::ReadEd25519PublicKey(pr, "public key"));
  if (!pr.empty()) {
    return r.Error("public key section has " + std::to_string(pr.remaining()) + " trailing bytes",
                   pub_at);
  }
  size_t priv_at = r.offset() + 4;
  GATOS_ASSIGN_OR_RETURN(std::string_view priv, r.ReadString("private key section"));
  GATOS_RETURN_IF_ERROR(r.ExpectEnd());
  if (priv.size() % kPrivateBlockSize != 0) {
    return r.Error("private key section length " + std::to_string(priv.size()) +
                       " is not a multiple of the block size 8",
                   priv_at);
  }

  // Offsets inside the private section are reported relative to the file blob.
  ssh::WireReader s(priv, "openssh private key: private section (starts at offset " +
                              std::to_string(priv_at) + ")");
  GATOS_ASSIGN_OR_RETURN(uint32_t check1, s.ReadU32("checkint 1"));
  GATOS_ASSIGN_OR_RETURN(uint32_t check2, s.ReadU32("checkint 2"));
  if (check1 != check2) {
    return s.Error("checkints differ: the key is corrupt (or encrypted and mis-decrypted)", 0);
  }
  size_t type_at = s.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view type, s.ReadString("key type"));
  if (type != kSshEd25519) {
    return s.Error("unsupported key type \"" + ssh::QuoteForError(type) +
                       "\"; only ssh-ed25519 keys are supported",
                   type_at);
  }
  size_t pk_at = s.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view pk, s.ReadString("public key"));
  if (pk.size() != 32) {
    return s.Error("ed25519 public key is " + std::to_string(pk.size()) + " bytes, expected 32",
                   pk_at);
  }
  size_t sk_at = s.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view sk, s.ReadString("secret key"));
  if (sk.size() != 64) {
    return s.Error("ed25519 secret key is " + std::to_string(sk.size()) + " bytes, expected 64",
                   sk_at);
  }
  GATOS_ASSIGN_OR_RETURN(std::string_view comment, s.ReadString("comment"));
  size_t pad_at = s.offset();
  GATOS_ASSIGN_OR_RETURN(std::string_view padding, s.ReadBytes(s.remaining(), "padding"));
  if (padding.size() >= kPrivateBlockSize) {
    return s.Error(std::to_string(padding.size()) +
                       " bytes of padding; at most 7 are allowed (trailing data?)",
                   pad_at);
  }
  for (size_t i = 0; i < padding.size(); ++i) {
    if (static_cast<uint8_t>(padding[i]) != i + 1) {
      return s.Error("invalid padding byte (expected " + std::to_string(i + 1) + ")", pad_at + i);
    }
  }
  if (std::memcmp(pk.data(), pub.data(), 32) != 0) {
    return s.Error("public key in the private section differs from the file's public key", pk_at);
  }
  if (std::memcmp(sk.data() + 32, pk.data(), 32) != 0) {
    return s.Error("secret key's embedded public half differs from the public key", sk_at);
  }
  Ed25519PrivateKey key;
  std::array<uint8_t, 32> derived_pk;
  crypto_sign_ed25519_seed_keypair(derived_pk.data(), key.secret_.data(),
                                   reinterpret_cast<const uint8_t*>(sk.data()));
  if (derived_pk != pub) {
    return s.Error("secret key does not belong to the public key (corrupt key)", sk_at);
  }
  key.public_key_.bytes = pub;
  key.public_key_.comment = std::string(comment);
  key.checkint_ = check1;
  return key;
}

std::string FormatOpenSshPrivateKey(const Ed25519PrivateKey& key) {
  ssh::WireWriter priv;
  priv.WriteU32(key.checkint_);
  priv.WriteU32(key.checkint_);
  priv.WriteString(kSshEd25519);
  priv.WriteString(key.public_key_.bytes.data(), 32);
  priv.WriteString(key.secret_.data(), 64);
  priv.WriteString(key.public_key_.comment);
  for (uint8_t pad = 1; priv.data().size() % kPrivateBlockSize != 0; ++pad) {
    priv.mutable_data().push_back(static_cast<char>(pad));
  }
  ssh::WireWriter file;
  file.WriteBytes(kAuthMagic);
  file.WriteString("none");
  file.WriteString("none");
  file.WriteString("");
  file.WriteU32(1);
  file.WriteString(key.public_key_.WireBlob());
  file.WriteString(priv.data());
  std::string& bin = file.mutable_data();
  std::string b64 = Base64Encode(reinterpret_cast<const uint8_t*>(bin.data()), bin.size());
  std::string out = std::string(kPrivateBegin) + "\n" + WrapLines(b64, kKeyLineWidth) +
                    std::string(kPrivateEnd) + "\n";
  sodium_memzero(priv.mutable_data().data(), priv.data().size());
  sodium_memzero(bin.data(), bin.size());
  sodium_memzero(b64.data(), b64.size());
  return out;
}

Result<Ed25519PrivateKey> ReadPrivateKeyFile(const std::string& path) {
  GATOS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxKeyText, {.secret = true}));
  Wiper<std::string> wipe(text);
  auto key = ParseOpenSshPrivateKey(text);
  if (!key.ok()) return key.status().WithContext(path);
  return key;
}

Result<Ed25519PublicKey> ReadPublicKeyFile(const std::string& path) {
  GATOS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxKeyText));
  auto key = ParseOpenSshPublicKey(text);
  if (!key.ok()) return key.status().WithContext(path);
  return key;
}

Status WriteKeyPair(const std::string& path, const Ed25519PrivateKey& key) {
  if (path.empty()) return InvalidArgumentError("key path is empty");
  const std::string pub_path = path + ".pub";
  struct stat st;
  if (::lstat(pub_path.c_str(), &st) == 0) {
    return AlreadyExistsError(pub_path + ": already exists; refusing to overwrite a key file");
  }
  std::string text = FormatOpenSshPrivateKey(key);
  Wiper<std::string> wipe(text);
  GATOS_RETURN_IF_ERROR(WriteNewFile(path, text, 0600));
  Status pub = WriteNewFile(pub_path, key.public_key().ToOpenSsh() + "\n", 0644);
  if (!pub.ok()) {
    ::unlink(path.c_str());
    return pub;
  }
  return OkStatus();
}

std::array<uint8_t, 64> Ed25519Sign(const Ed25519PrivateKey& key, std::string_view message) {
  ssh::EnsureSodium().IgnoreError();  // signing uses no RNG; init only picks implementations
  std::array<uint8_t, 64> sig;
  crypto_sign_ed25519_detached(sig.data(), nullptr,
                               reinterpret_cast<const uint8_t*>(message.data()), message.size(),
                               key.secret_.data());
  return sig;
}

Status Ed25519Verify(const Ed25519PublicKey& key, std::string_view message, const uint8_t sig[64]) {
  GATOS_RETURN_IF_ERROR(ssh::EnsureSodium());
  if (crypto_sign_ed25519_verify_detached(sig, reinterpret_cast<const uint8_t*>(message.data()),
                                          message.size(), key.bytes.data()) != 0) {
    return PermissionDeniedError("ed25519 signature does not verify for key " + key.WorkerId());
  }
  return OkStatus();
}

}  // namespace gatos
