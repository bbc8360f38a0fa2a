// Commit message trailers ("Key: value" lines at the end of a message), read
// and written the way `git interpret-trailers --parse` does, so what the
// ledger writes is what stock git shows.
//
// Thread-safety: pure functions.
#ifndef GATOS_TRAILERS_H_
#define GATOS_TRAILERS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/model/status.h"

namespace gatos {

inline constexpr size_t kMaxCommitMessageBytes = 1 << 20;

struct Trailer {
  std::string key;
  std::string value;
  bool operator==(const Trailer&) const = default;
};

struct CommitMessage {
  // Everything before the trailer block, without the blank line(s) that
  // separate it from the trailers and without a final newline.
  std::string body;
  std::vector<Trailer> trailers;
  bool operator==(const CommitMessage&) const = default;
};

// Splits a message into body and trailers. The trailer block is found with
// git's rules (the last paragraph, not the title paragraph, all of whose lines
// are trailers or continuation lines; or at least 25% trailers when one is
// git-generated such as "Signed-off-by: "); a message without one has no
// trailers and its whole text is the body. Continuation lines (leading
// whitespace) are folded into the value with one space, as `git
// interpret-trailers --parse` (--unfold) does; values are trimmed.
// Stricter than git, InvalidArgument when:
//  - the message is larger than kMaxCommitMessageBytes;
//  - a line of the trailer block is not "Key: value" with Key in
//    [A-Za-z0-9-]+ directly followed by ':' (git would also accept
//    "Key : value", comment lines and non-trailer lines in a 25% block);
//  - anything other than blank lines follows the trailer block (git stops
//    at a "---" line or trailing comment lines; we refuse to drop them).
Result<CommitMessage> ParseCommitMessage(std::string_view message);

// body + "\n\n" + "Key: value\n" per trailer (body + "\n" when there are no
// trailers). For valid keys ([A-Za-z0-9-]+) and single-line values without
// leading/trailing whitespace the result parses back to the same
// CommitMessage, with this parser and with git. A '\n' in a value is written
// as a continuation line (" " + next line), which both fold back to a space.
std::string FormatCommitMessage(const CommitMessage& message);

// True for a key git and this parser both accept: [A-Za-z0-9-]+.
bool IsValidTrailerKey(std::string_view key);

// The value of the first trailer whose key equals `key` exactly.
std::optional<std::string> FindTrailer(const std::vector<Trailer>& trailers, std::string_view key);

// The value of the only trailer named `key`. NotFound if absent,
// InvalidArgument if it appears more than once.
Result<std::string> RequireUniqueTrailer(const std::vector<Trailer>& trailers,
                                         std::string_view key);

}  // namespace gatos

#endif  // GATOS_TRAILERS_H_
