// SSH wire format (RFC 4251 section 5): uint32 big-endian and length-prefixed
// strings, as used by OpenSSH key files, public key blobs and SSHSIG.
//
// WireReader never reads outside the buffer it was given: every read checks
// the remaining length first and returns InvalidArgument naming the field,
// its byte offset and the object being parsed. WireWriter appends only.
//
// Thread-safety: instances are not shared; each belongs to one thread.
#ifndef GATOS_SSH_WIRE_H_
#define GATOS_SSH_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "gatos/model/status.h"

namespace gatos::ssh {

class WireReader {
 public:
  // `what` names the object in errors, e.g. "openssh private key" (copied).
  // The reader holds a view: `data` must outlive it.
  WireReader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}

  // Reads a uint32; `field` names it in errors.
  Result<uint32_t> ReadU32(std::string_view field);
  // Reads a uint32 length and that many bytes. InvalidArgument if the length
  // runs past the end of the buffer.
  Result<std::string_view> ReadString(std::string_view field);
  // Reads exactly `n` raw bytes.
  Result<std::string_view> ReadBytes(size_t n, std::string_view field);
  // ReadString, then InvalidArgument unless the string equals `expected`.
  Status ExpectString(std::string_view expected, std::string_view field);
  // InvalidArgument unless every byte was consumed.
  Status ExpectEnd() const;

  size_t offset() const { return offset_; }
  size_t remaining() const { return data_.size() - offset_; }
  bool empty() const { return remaining() == 0; }

  // "<what>: <message> at offset N", for callers that detect semantic errors.
  Status Error(std::string_view message, size_t offset) const;

 private:
  std::string_view data_;
  std::string what_;
  size_t offset_ = 0;
};

class WireWriter {
 public:
  void WriteU32(uint32_t v);
  // Length-prefixed string. `s.size()` must fit in a uint32 (callers only
  // write keys, names and small blobs).
  void WriteString(std::string_view s);
  void WriteString(const uint8_t* data, size_t len) {
    WriteString(std::string_view(reinterpret_cast<const char*>(data), len));
  }
  void WriteBytes(std::string_view s) { out_.append(s); }

  const std::string& data() const { return out_; }
  std::string& mutable_data() { return out_; }
  std::string Release() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads string "ssh-ed25519" + string key(32); `field` names it in errors.
Result<std::array<uint8_t, 32>> ReadEd25519PublicKey(WireReader& r, std::string_view field);

// Printable form of a wire string for error messages: at most 40 chars, with
// non-printable bytes as \xNN. Never pass secret material.
std::string QuoteForError(std::string_view s);

}  // namespace gatos::ssh

#endif  // GATOS_SSH_WIRE_H_
