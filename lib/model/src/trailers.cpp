// The trailer block is located with the algorithm of git 2.39 trailer.c
// (find_patch_start, ignore_non_trailer, find_trailer_start,
// trailer_info_get, unfold_value), so that both sides agree on which lines
// are trailers. Positions are offsets into the message; the end of the
// message plays the role of git's terminating NUL.
#include "gatos/model/trailers.h"

#include <string>

namespace gatos {
namespace {

constexpr char kCommentChar = '#';
constexpr std::string_view kCutLine = "# ------------------------ >8 ------------------------\n";
constexpr std::string_view kGitGeneratedPrefixes[] = {"Signed-off-by: ",
                                                      "(cherry picked from commit "};

// git's isspace (sane_ctype GIT_SPACE): no \v or \f.
bool GitIsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool GitIsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

char At(std::string_view s, size_t i) { return i < s.size() ? s[i] : '\0'; }

size_t NextLine(std::string_view s, size_t pos) {
  const size_t nl = s.find('\n', pos);
  return nl == std::string_view::npos ? s.size() : nl + 1;
}

// Start of the line before `len` (the last character is part of that line
// even if it is a newline); -1 for an empty range.
long LastLine(std::string_view s, size_t len) {
  if (len == 0) return -1;
  if (len == 1) return 0;
  for (long i = static_cast<long>(len) - 2; i >= 0; --i) {
    if (s[static_cast<size_t>(i)] == '\n') return i + 1;
  }
  return 0;
}

bool IsBlankLine(std::string_view s, size_t pos) {
  while (pos < s.size() && s[pos] != '\n' && GitIsSpace(s[pos])) ++pos;
  return pos >= s.size() || s[pos] == '\n';
}

bool StartsWith(std::string_view s, size_t pos, std::string_view prefix) {
  return s.substr(pos).substr(0, prefix.size()) == prefix;
}

// Offset of ':' ending a token ([A-Za-z0-9-]+, then optional blanks), or -1.
long FindSeparator(std::string_view s, size_t pos) {
  bool whitespace_found = false;
  for (size_t c = pos; c < s.size(); ++c) {
    const char ch = s[c];
    if (ch == ':') return static_cast<long>(c - pos);
    if (!whitespace_found && (GitIsAlnum(ch) || ch == '-')) continue;
    if (c != pos && (ch == ' ' || ch == '\t')) {
      whitespace_found = true;
      continue;
    }
    break;
  }
  return -1;
}

size_t FindPatchStart(std::string_view s) {
  for (size_t p = 0; p < s.size(); p = NextLine(s, p)) {
    if (StartsWith(s, p, "---") && GitIsSpace(At(s, p + 3))) return p;
  }
  return s.size();
}

// Bytes at the end of s[0, len) that are trailing comments, blank lines or an
// old "Conflicts:" block (git's ignore_non_trailer, including its quirk that a
// run starting at offset 0 is not ignored).
size_t IgnoreNonTrailer(std::string_view s, size_t len) {
  size_t boc = 0, bol = 0;
  bool in_old_conflicts_block = false;
  while (bol < len) {
    const size_t nl = s.substr(0, len).find('\n', bol);
    const size_t next = nl == std::string_view::npos ? len : nl + 1;
    if (s[bol] == kCommentChar || s[bol] == '\n') {
      if (!boc) boc = bol;
    } else if (StartsWith(s, bol, "Conflicts:\n")) {
      in_old_conflicts_block = true;
      if (!boc) boc = bol;
    } else if (in_old_conflicts_block && s[bol] == '\t') {
      // a path name in the conflicts block
    } else if (boc) {
      boc = 0;
      in_old_conflicts_block = false;
    }
    bol = next;
  }
  return boc ? len - boc : 0;
}

size_t FindTrailerStart(std::string_view s, size_t len) {
  size_t p = 0;
  for (; p < len; p = NextLine(s, p)) {
    if (s[p] == kCommentChar) continue;
    if (IsBlankLine(s, p)) break;
  }
  const long end_of_title = static_cast<long>(p);
  bool only_spaces = true, recognized_prefix = false;
  int trailer_lines = 0, non_trailer_lines = 0, possible_continuation_lines = 0;
  for (long l = LastLine(s, len); l >= end_of_title; l = LastLine(s, static_cast<size_t>(l))) {
    const size_t bol = static_cast<size_t>(l);
    if (s[bol] == kCommentChar) {
      non_trailer_lines += possible_continuation_lines;
      possible_continuation_lines = 0;
      continue;
    }
    if (IsBlankLine(s, bol)) {
      if (only_spaces) continue;
      non_trailer_lines += possible_continuation_lines;
      if (recognized_prefix && trailer_lines * 3 >= non_trailer_lines) return NextLine(s, bol);
      if (trailer_lines && !non_trailer_lines) return NextLine(s, bol);
      return len;
    }
    only_spaces = false;
    bool generated = false;
    for (std::string_view prefix : kGitGeneratedPrefixes) {
      if (StartsWith(s, bol, prefix)) generated = true;
    }
    if (generated) {
      ++trailer_lines;
      possible_continuation_lines = 0;
      recognized_prefix = true;
      continue;
    }
    if (FindSeparator(s, bol) >= 1 && !GitIsSpace(s[bol])) {
      ++trailer_lines;
      possible_continuation_lines = 0;
    } else if (GitIsSpace(s[bol])) {
      ++possible_continuation_lines;
    } else {
      ++non_trailer_lines;
      non_trailer_lines += possible_continuation_lines;
      possible_continuation_lines = 0;
    }
  }
  return len;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && GitIsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && GitIsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// git's unfold_value: each newline and the whitespace after it become one
// space; then trim.
std::string Unfold(std::string_view v) {
  v = Trim(v);  // the same as trimming after: a folded newline becomes a space
  std::string out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size();) {
    const size_t nl = v.find('\n', i);
    if (nl == std::string_view::npos) {
      out.append(v.substr(i));
      break;
    }
    out.append(v.substr(i, nl - i));
    i = nl + 1;
    while (i < v.size() && GitIsSpace(v[i])) ++i;
    out.push_back(' ');
  }
  return out;
}

int LineNumber(std::string_view s, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < s.size(); ++i) line += s[i] == '\n';
  return line;
}

}  // namespace

bool IsValidTrailerKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!GitIsAlnum(c) && c != '-') return false;
  }
  return true;
}

Result<CommitMessage> ParseCommitMessage(std::string_view msg) {
  if (msg.size() > kMaxCommitMessageBytes) {
    return InvalidArgumentError("commit message of " + std::to_string(msg.size()) +
                                " bytes exceeds the limit of " +
                                std::to_string(kMaxCommitMessageBytes) + " bytes");
  }
  if (msg.find('\0') != std::string_view::npos) {
    return InvalidArgumentError("commit message contains a NUL byte");
  }
  // A scissors line, also with trailing white space (which a body loses when
  // formatted again, so a message accepted once would be refused after).
  {
    const std::string_view cut = Trim(kCutLine);
    size_t at = 0;
    while (at <= msg.size()) {
      size_t end = msg.find('\n', at);
      if (end == std::string_view::npos) end = msg.size();
      std::string_view line = msg.substr(at, end - at);
      while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
      if (line == cut) {
        return InvalidArgumentError("commit message contains a scissors line ('" + std::string(cut) + "'); remove it");
      }
      at = end + 1;
    }
  }
  const size_t patch_start = FindPatchStart(msg);
  const size_t trailer_end = patch_start - IgnoreNonTrailer(msg, patch_start);
  const size_t trailer_start = FindTrailerStart(msg, trailer_end);

  CommitMessage out;
  if (trailer_start >= trailer_end) {
    out.body = std::string(msg);
  } else {
    for (size_t i = trailer_end; i < msg.size(); ++i) {
      if (!GitIsSpace(msg[i])) {
        return InvalidArgumentError(
            "line " + std::to_string(LineNumber(msg, i)) +
            ": text after the trailer block (a '---' line, comment or conflicts list); "
            "trailers must end the message");
      }
    }
    // Group lines into trailers with their continuation lines, like git.
    // A trailer's continuation lines follow it, so its text is one range.
    struct Raw {
      size_t start;
      std::string_view text;
      bool is_trailer;
    };
    std::vector<Raw> raws;
    for (size_t p = trailer_start; p < trailer_end;) {
      const size_t nl = msg.substr(0, trailer_end).find('\n', p);
      const size_t next = nl == std::string_view::npos ? trailer_end : nl + 1;
      const std::string_view line = msg.substr(p, next - p);
      if (!raws.empty() && raws.back().is_trailer && GitIsSpace(line[0])) {
        raws.back().text = msg.substr(raws.back().start, next - raws.back().start);
      } else {
        raws.push_back(Raw{p, line, FindSeparator(line, 0) >= 1});
      }
      p = next;
    }
    out.trailers.reserve(raws.size());
    for (const Raw& raw : raws) {
      // Built only for an error: counting lines for every trailer costs more than the parse.
      auto where = [&] { return "line " + std::to_string(LineNumber(msg, raw.start)) + ": "; };
      if (raw.text[0] == kCommentChar) {
        return InvalidArgumentError(where() + "comment line inside the trailer block; remove it");
      }
      const long sep = FindSeparator(raw.text, 0);
      if (sep < 1) {
        return InvalidArgumentError(where() + "'" + std::string(Trim(raw.text)) +
                                    "' in the trailer block is not a 'Key: value' trailer");
      }
      const std::string_view key = raw.text.substr(0, static_cast<size_t>(sep));
      if (!IsValidTrailerKey(key)) {
        return InvalidArgumentError(where() + "trailer key '" + std::string(key) +
                                    "' must be [A-Za-z0-9-]+ directly followed by ':'");
      }
      out.trailers.push_back(
          Trailer{std::string(key), Unfold(raw.text.substr(sep + 1))});
    }
    out.body = std::string(msg.substr(0, trailer_start));
  }
  while (!out.body.empty() && GitIsSpace(out.body.back())) out.body.pop_back();
  return out;
}

std::string FormatCommitMessage(const CommitMessage& message) {
  std::string out = message.body;
  if (message.trailers.empty()) {
    if (!out.empty()) out += "\n";
    return out;
  }
  out += "\n\n";
  for (const Trailer& t : message.trailers) {
    out += t.key;
    out += ": ";
    for (char c : t.value) {
      out.push_back(c);
      if (c == '\n') out.push_back(' ');
    }
    out += "\n";
  }
  return out;
}

std::optional<std::string> FindTrailer(const std::vector<Trailer>& trailers, std::string_view key) {
  for (const Trailer& t : trailers) {
    if (t.key == key) return t.value;
  }
  return std::nullopt;
}

Result<std::string> RequireUniqueTrailer(const std::vector<Trailer>& trailers,
                                         std::string_view key) {
  const std::string* found = nullptr;
  for (const Trailer& t : trailers) {
    if (t.key != key) continue;
    if (found) {
      return InvalidArgumentError("trailer '" + std::string(key) +
                                  "' appears more than once; expected exactly one");
    }
    found = &t.value;
  }
  if (!found) return NotFoundError("trailer '" + std::string(key) + "' is missing");
  return *found;
}

}  // namespace gatos
