#include "gatos/model/ssh_wire.h"

#include <cstdio>

namespace gatos::ssh {

Status WireReader::Error(std::string_view message, size_t offset) const {
  return InvalidArgumentError(std::string(what_) + ": " + std::string(message) + " at offset " +
                              std::to_string(offset));
}

Result<std::string_view> WireReader::ReadBytes(size_t n, std::string_view field) {
  if (n > remaining()) {
    return Error("truncated " + std::string(field) + ": needs " + std::to_string(n) +
                     " bytes but only " + std::to_string(remaining()) + " remain",
                 offset_);
  }
  std::string_view out = data_.substr(offset_, n);
  offset_ += n;
  return out;
}

Result<uint32_t> WireReader::ReadU32(std::string_view field) {
  GATOS_ASSIGN_OR_RETURN(std::string_view b, ReadBytes(4, field));
  return static_cast<uint32_t>(static_cast<uint8_t>(b[0])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[3]));
}

Result<std::string_view> WireReader::ReadString(std::string_view field) {
  size_t start = offset_;
  GATOS_ASSIGN_OR_RETURN(uint32_t len, ReadU32(std::string(field) + " length"));
  if (len > remaining()) {
    size_t avail = remaining();
    offset_ = start;  // leave the reader where the bad field began
    return Error("length " + std::to_string(len) + " of " + std::string(field) + " exceeds the " +
                     std::to_string(avail) + " bytes that remain",
                 start);
  }
  return ReadBytes(len, field);
}

Status WireReader::ExpectString(std::string_view expected, std::string_view field) {
  size_t start = offset_;
  GATOS_ASSIGN_OR_RETURN(std::string_view got, ReadString(field));
  if (got != expected) {
    return Error(std::string(field) + " is \"" + QuoteForError(got) + "\", expected \"" +
                     std::string(expected) + "\"",
                 start);
  }
  return OkStatus();
}

Status WireReader::ExpectEnd() const {
  if (!empty()) {
    return Error(std::to_string(remaining()) + " unexpected trailing bytes", offset_);
  }
  return OkStatus();
}

void WireWriter::WriteU32(uint32_t v) {
  out_.push_back(static_cast<char>(v >> 24));
  out_.push_back(static_cast<char>(v >> 16));
  out_.push_back(static_cast<char>(v >> 8));
  out_.push_back(static_cast<char>(v));
}

void WireWriter::WriteString(std::string_view s) {
  WriteU32(static_cast<uint32_t>(s.size()));
  out_.append(s);
}

std::string QuoteForError(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace gatos::ssh
