// RefReader: refs read straight from a repository's files, for the
// auditor's incremental run.
#ifndef GATOS_AUDIT_SRC_REF_READER_H_
#define GATOS_AUDIT_SRC_REF_READER_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gatos/crypto/sshsig.h"
#include "gatos/git/result.h"
#include "gatos/ledger/checks.h"
#include "gatos/ledger/state_index.h"
#include "gatos/ledger/witness.h"
#include "gatos/model/encoding.h"
#include "gatos/model/job_record.h"
#include "gatos/model/job_state.h"
#include "gatos/model/ledger_commits.h"
#include "gatos/model/log_format.h"
#include "gatos/model/manifest.h"
#include "gatos/model/policy.h"
#include "gatos/model/refs.h"
#include "gatos/model/rpc.h"
#include "gatos/model/transition.h"

namespace gatos {
namespace audit_internal {


// Reads refs straight from the repository's files, for the incremental run:
// a loose ref file, else a binary search of the sorted packed-refs file
// (mmap'ed). Cost per lookup: O(log refs), where asking libgit2 would load
// every packed ref first (seconds at a million jobs).
class RefReader {
 public:
  explicit RefReader(const std::string& repo) {
    git_dir_ = repo;
    if (std::filesystem::exists(repo + "/.git")) git_dir_ = repo + "/.git";
    int fd = ::open((git_dir_ + "/packed-refs").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (m != MAP_FAILED) {
        data_ = static_cast<const char*>(m);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
    std::string_view all(data_ ? data_ : "", size_);
    if (all.rfind("# pack-refs with:", 0) == 0) {
      std::string_view header = all.substr(0, all.find('\n'));
      sorted_ = header.find(" sorted") != std::string_view::npos;
    }
  }
  ~RefReader() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  RefReader(const RefReader&) = delete;
  RefReader& operator=(const RefReader&) = delete;

  // Every ref under `prefix` (ending with '/') with its value.
  std::map<std::string, std::string> Under(const std::string& prefix) {
    std::map<std::string, std::string> out;
    ForEachUnder(prefix, [&](std::string_view name, std::string_view id) { out.emplace(name, id); });
    return out;
  }
  // Calls fn(name, id) for every ref under `prefix` in name order (a loose
  // ref over a packed one of the same name), holding only views of the
  // packed refs and the loose ones: the refs of a million jobs are four
  // million, too many for a tree of strings.
  template <typename Fn>
  void ForEachUnder(const std::string& prefix, Fn fn) {
    std::map<std::string, std::string> loose;
    std::error_code ec;
    std::string dir = git_dir_ + "/" + prefix;
    if (std::filesystem::is_directory(dir, ec)) {
      for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        std::string path = it->path().string();
        if (path.size() > 5 && path.compare(path.size() - 5, 5, ".lock") == 0) continue;
        std::string name = prefix + path.substr(dir.size());
        std::string v = Loose(name);
        if (!v.empty()) loose[name] = v;
      }
    }
    using Ref = std::pair<std::string_view, std::string_view>;
    std::vector<Ref> packed;
    ForEachPacked(prefix, [&](std::string_view name, std::string_view id) { packed.emplace_back(name, id); });
    auto by_name = [](const Ref& a, const Ref& b) { return a.first < b.first; };
    if (!std::is_sorted(packed.begin(), packed.end(), by_name)) {
      std::stable_sort(packed.begin(), packed.end(), by_name);
    }
    auto l = loose.begin();
    for (size_t i = 0; i < packed.size(); ++i) {
      // A name packed twice: the last line holds, as when read into a map.
      if (i + 1 < packed.size() && packed[i + 1].first == packed[i].first) continue;
      for (; l != loose.end() && std::string_view(l->first) < packed[i].first; ++l) fn(l->first, l->second);
      if (l != loose.end() && std::string_view(l->first) == packed[i].first) {
        fn(l->first, l->second);
        ++l;
        continue;
      }
      fn(packed[i].first, packed[i].second);
    }
    for (; l != loose.end(); ++l) fn(l->first, l->second);
  }
  // "" when absent.
  std::string Resolve(const std::string& name) {
    std::string v = Loose(name);
    if (!v.empty()) return v;
    std::string found;
    ForEachPacked(name, [&](std::string_view n, std::string_view id) {
      if (n == name) found = std::string(id);
    });
    return found;
  }

 private:
  std::string Loose(const std::string& name) {
    std::ifstream in(git_dir_ + "/" + name);
    std::string line;
    if (!in || !std::getline(in, line)) return "";
    return IsLowerHex(line, 40) ? line : "";
  }
  // Lines "<40 hex> <name>" of packed-refs whose name starts with `prefix`.
  template <typename Fn>
  void ForEachPacked(const std::string& prefix, Fn fn) {
    if (!data_) return;
    std::string_view all(data_, size_);
    auto line_at = [&](size_t pos) {
      size_t nl = all.find('\n', pos);
      return all.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    };
    auto name_of = [](std::string_view line) {
      return line.size() > 41 && line[40] == ' ' ? line.substr(41) : std::string_view();
    };
    size_t start = 0;
    if (sorted_) {
      // The first record line whose name is >= prefix.
      size_t lo = 0, hi = size_;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t pos = mid == 0 ? 0 : all.find('\n', mid - 1);
        pos = pos == std::string_view::npos ? size_ : (mid == 0 ? 0 : pos + 1);
        while (pos < size_ && (all[pos] == '#' || all[pos] == '^')) {
          size_t nl = all.find('\n', pos);
          pos = nl == std::string_view::npos ? size_ : nl + 1;
        }
        if (pos >= size_ || name_of(line_at(pos)) >= prefix) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      size_t pos = lo == 0 ? 0 : all.find('\n', lo - 1);
      start = pos == std::string_view::npos ? size_ : (lo == 0 ? 0 : pos + 1);
    }
    for (size_t pos = start; pos < size_;) {
      std::string_view line = line_at(pos);
      pos += line.size() + 1;
      std::string_view name = name_of(line);
      if (name.empty()) continue;
      if (name.substr(0, prefix.size()) == prefix) {
        fn(name, line.substr(0, 40));
      } else if (sorted_ && name > prefix) {
        break;
      }
    }
  }

  std::string git_dir_;
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool sorted_ = false;
};

}  // namespace audit_internal
}  // namespace gatos

#endif  // GATOS_AUDIT_SRC_REF_READER_H_
