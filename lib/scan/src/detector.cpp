#include "gatos/scan/detector.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <hs/hs.h>
#include <pcre2.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "gatos/model/blake3.h"
#include "gatos/scan/value_decode.h"

namespace gatos::scan {
namespace {

// Bytes after the last prefilter hit that PCRE2 may look at, for lookaheads
// and greedy tails. A match that reaches the end of this cut is discarded as
// an artefact of the cut (it would be re-decided by the full subject).
constexpr uint64_t kLookahead = 256;
constexpr uint32_t kMatchLimit = 2'000'000;
// A line holding this marker (any case) reports nothing: the inline way to
// accept a test fixture or a documented example where it is written.
constexpr std::string_view kInlineAllow = "gatos:allow";

struct HsDbFree {
  void operator()(hs_database_t* d) const { hs_free_database(d); }
};
struct HsScratchFree {
  void operator()(hs_scratch_t* s) const { hs_free_scratch(s); }
};
struct PcreCodeFree {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct PcreMatchDataFree {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
struct PcreMatchContextFree {
  void operator()(pcre2_match_context* m) const { pcre2_match_context_free(m); }
};
struct PcreJitStackFree {
  void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); }
};
using PcrePtr = std::unique_ptr<pcre2_code, PcreCodeFree>;

Result<PcrePtr> CompilePcre(const std::string& pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  PcrePtr code(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_MULTILINE, &err, &offset, nullptr));
  if (!code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return InvalidArgumentError(where + ": regex does not compile at offset " +
                                std::to_string(offset) + ": " + reinterpret_cast<const char*>(buf));
  }
  // JIT is an optimization: if it is unavailable PCRE2 interprets.
  pcre2_jit_compile(code.get(), PCRE2_JIT_COMPLETE);
  return code;
}

struct CompiledAllowlist {
  std::vector<PcrePtr> paths;
  std::vector<PcrePtr> regexes;
  std::vector<PcrePtr> match_regexes;
  std::vector<PcrePtr> line_regexes;
  std::vector<PcrePtr> decoded_regexes;
  std::vector<std::string> stopwords;
};

Result<CompiledAllowlist> CompileAllowlist(const Allowlist& a, const std::string& where) {
  CompiledAllowlist c;
  for (const std::string& p : a.paths) {
    GATOS_ASSIGN_OR_RETURN(PcrePtr code, CompilePcre(p, where + ": allowlist path"));
    c.paths.push_back(std::move(code));
  }
  for (const std::string& p : a.regexes) {
    GATOS_ASSIGN_OR_RETURN(PcrePtr code, CompilePcre(p, where + ": allowlist regex"));
    c.regexes.push_back(std::move(code));
  }
  for (const std::string& p : a.match_regexes) {
    GATOS_ASSIGN_OR_RETURN(PcrePtr code, CompilePcre(p, where + ": allowlist match_regex"));
    c.match_regexes.push_back(std::move(code));
  }
  for (const std::string& p : a.line_regexes) {
    GATOS_ASSIGN_OR_RETURN(PcrePtr code, CompilePcre(p, where + ": allowlist line_regex"));
    c.line_regexes.push_back(std::move(code));
  }
  for (const std::string& p : a.decoded_regexes) {
    GATOS_ASSIGN_OR_RETURN(PcrePtr code, CompilePcre(p, where + ": allowlist decoded_regex"));
    c.decoded_regexes.push_back(std::move(code));
  }
  c.stopwords = a.stopwords;
  return c;
}

bool ContainsLowered(std::string_view hay, std::string_view lower_needle) {
  if (lower_needle.empty()) return true;
  if (hay.size() < lower_needle.size()) return false;
  for (size_t i = 0; i + lower_needle.size() <= hay.size(); ++i) {
    size_t j = 0;
    for (; j < lower_needle.size(); ++j) {
      char c = hay[i + j];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != lower_needle[j]) break;
    }
    if (j == lower_needle.size()) return true;
  }
  return false;
}

bool AnyMatches(const std::vector<PcrePtr>& codes, std::string_view text, pcre2_match_data* md,
                pcre2_match_context* mc) {
  for (const PcrePtr& c : codes) {
    int rc =
        pcre2_match(c.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, mc);
    if (rc >= 0) return true;
  }
  return false;
}

bool Stopworded(const std::vector<std::string>& stopwords, std::string_view secret) {
  for (const std::string& w : stopwords) {
    if (ContainsLowered(secret, w)) return true;
  }
  return false;
}

struct CompiledRule {
  PcrePtr code;  // null for a path-only rule
  PcrePtr path;  // null: any path
  int secret_group = 0;
  uint64_t window = kDefaultWindow;
  CompiledAllowlist allowlist;
};

// A span [begin, end] of hit end offsets for one rule, already widened.
struct Window {
  uint64_t begin;
  uint64_t end;
};

}  // namespace

struct Detector::Impl {
  RuleSet rules;
  std::vector<CompiledRule> compiled;
  CompiledAllowlist global;
  std::vector<size_t> path_only;  // rules without a content regex
  std::unique_ptr<hs_database_t, HsDbFree> db;  // null when every rule is path-only
  std::unique_ptr<hs_scratch_t, HsScratchFree> prototype;
  uint32_t max_groups = 1;
};

struct Detector::Scratch::State {
  std::unique_ptr<hs_scratch_t, HsScratchFree> hs;
  std::unique_ptr<pcre2_match_data, PcreMatchDataFree> md;
  std::unique_ptr<pcre2_match_context, PcreMatchContextFree> mc;
  std::unique_ptr<pcre2_jit_stack, PcreJitStackFree> jit_stack;
  std::vector<std::vector<Window>> windows;  // per rule
  std::vector<uint32_t> touched;             // rules with at least one hit
  const Detector::Impl* impl = nullptr;
};

Detector::Scratch::Scratch(std::unique_ptr<State> state) : state_(std::move(state)) {}
Detector::Scratch::~Scratch() = default;

Detector::Detector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Detector::~Detector() = default;

const RuleSet& Detector::rules() const { return impl_->rules; }

namespace {

// The cache file of a compiled database: named by BLAKE3 over the Vectorscan
// version and every expression, flag and id, so a file is only ever read
// for exactly the database it holds.
std::string CachePath(const std::string& dir, const std::vector<const char*>& exprs,
                      const std::vector<unsigned>& flags, const std::vector<unsigned>& ids) {
  Blake3Hasher h;
  h.Update(hs_version());
  for (size_t i = 0; i < exprs.size(); ++i) {
    h.Update(std::string_view("\0", 1));
    h.Update(exprs[i]);
    h.Update("\0" + std::to_string(flags[i]) + "," + std::to_string(ids[i]));
  }
  return dir + "/" + TaggedDigest(h.Finalize()).substr(7) + ".hsdb";
}

// A cached database, or null. Vectorscan checks the magic, version, platform
// and a CRC of the bytecode, so a stale or damaged file is refused here and
// the database compiled again.
hs_database_t* LoadCached(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  hs_database_t* db = nullptr;
  if (hs_deserialize_database(bytes.data(), bytes.size(), &db) != HS_SUCCESS) return nullptr;
  return db;
}

// Best effort: a cache that cannot be written only costs the next run time.
void StoreCached(const std::string& dir, const std::string& path, const hs_database_t* db) {
  char* bytes = nullptr;
  size_t len = 0;
  if (hs_serialize_database(db, &bytes, &len) != HS_SUCCESS) return;
  std::unique_ptr<char, decltype(&std::free)> guard(bytes, &std::free);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes, static_cast<std::streamsize>(len));
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

Result<std::unique_ptr<Detector>> Detector::Create(const RuleSet& rules) {
  return Create(rules, "");
}

Result<std::unique_ptr<Detector>> Detector::Create(const RuleSet& rules,
                                                   const std::string& cache_dir) {
  auto impl = std::make_unique<Impl>();
  impl->rules = rules;
  GATOS_ASSIGN_OR_RETURN(impl->global, CompileAllowlist(rules.allowlist, "global allowlist"));
  if (rules.rules.empty()) {
    return InvalidArgumentError("no rules to scan with (give --rules FILE or keep the defaults)");
  }
  std::vector<const char*> exprs;
  std::vector<unsigned> flags;
  std::vector<unsigned> ids;
  for (size_t i = 0; i < rules.rules.size(); ++i) {
    const Rule& r = rules.rules[i];
    const std::string where = r.origin + ": rule " + r.id;
    CompiledRule c;
    GATOS_ASSIGN_OR_RETURN(c.allowlist, CompileAllowlist(r.allowlist, where));
    if (!r.path.empty()) {
      GATOS_ASSIGN_OR_RETURN(c.path, CompilePcre(r.path, where + ": path"));
    }
    if (r.path_only()) {
      if (!c.path) return InvalidArgumentError(where + ": rule has neither regex nor path");
      impl->path_only.push_back(i);
      impl->compiled.push_back(std::move(c));
      continue;
    }
    GATOS_ASSIGN_OR_RETURN(c.code, CompilePcre(r.regex, where));
    uint32_t groups = 0;
    pcre2_pattern_info(c.code.get(), PCRE2_INFO_CAPTURECOUNT, &groups);
    if (r.secret_group > static_cast<int>(groups)) {
      return InvalidArgumentError(where + ": secret_group " + std::to_string(r.secret_group) +
                                  " but the regex has " + std::to_string(groups) +
                                  " capture groups (use (?:...) for groups that are not the "
                                  "secret)");
    }
    c.secret_group = r.secret_group >= 0 ? r.secret_group : (groups > 0 ? 1 : 0);
    c.window = r.window == 0 ? kDefaultWindow : r.window;
    impl->max_groups = std::max(impl->max_groups, groups + 1);
    impl->compiled.push_back(std::move(c));
    exprs.push_back(r.regex.c_str());
    flags.push_back(HS_FLAG_PREFILTER | HS_FLAG_MULTILINE);
    ids.push_back(static_cast<unsigned>(i));
  }
  if (exprs.empty()) return std::unique_ptr<Detector>(new Detector(std::move(impl)));
  const std::string cache_path = cache_dir.empty() ? "" : CachePath(cache_dir, exprs, flags, ids);
  hs_database_t* db = cache_path.empty() ? nullptr : LoadCached(cache_path);
  hs_compile_error_t* err = nullptr;
  hs_error_t rc = HS_SUCCESS;
  if (db == nullptr) {
    rc = hs_compile_multi(exprs.data(), flags.data(), ids.data(),
                          static_cast<unsigned>(exprs.size()), HS_MODE_BLOCK, nullptr, &db, &err);
    if (rc == HS_SUCCESS && !cache_path.empty()) StoreCached(cache_dir, cache_path, db);
  }
  if (rc != HS_SUCCESS) {
    std::string msg = err && err->message ? err->message : "unknown error";
    std::string where = "rules";
    if (err && err->expression >= 0 && static_cast<size_t>(err->expression) < ids.size()) {
      const Rule& r = rules.rules[ids[err->expression]];
      where = r.origin + ": rule " + r.id;
    }
    hs_free_compile_error(err);
    return InvalidArgumentError(where + ": Vectorscan rejects the regex: " + msg +
                                " (simplify it; see docs/scan.md, rules format)");
  }
  impl->db.reset(db);
  hs_scratch_t* scratch = nullptr;
  if (hs_alloc_scratch(db, &scratch) != HS_SUCCESS) {
    return InternalError("Vectorscan could not allocate scratch space for the rules");
  }
  impl->prototype.reset(scratch);
  return std::unique_ptr<Detector>(new Detector(std::move(impl)));
}

Result<std::unique_ptr<Detector::Scratch>> Detector::NewScratch() const {
  auto st = std::make_unique<Scratch::State>();
  if (impl_->prototype) {
    hs_scratch_t* s = nullptr;
    if (hs_clone_scratch(impl_->prototype.get(), &s) != HS_SUCCESS) {
      return InternalError("Vectorscan could not clone scratch space (out of memory?)");
    }
    st->hs.reset(s);
  }
  st->md.reset(pcre2_match_data_create(impl_->max_groups, nullptr));
  st->mc.reset(pcre2_match_context_create(nullptr));
  st->jit_stack.reset(pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr));
  if (!st->md || !st->mc || !st->jit_stack) {
    return InternalError("PCRE2 could not allocate match data (out of memory?)");
  }
  pcre2_jit_stack_assign(st->mc.get(), nullptr, st->jit_stack.get());
  pcre2_set_match_limit(st->mc.get(), kMatchLimit);
  st->windows.resize(impl_->compiled.size());
  st->impl = impl_.get();
  return std::unique_ptr<Scratch>(new Scratch(std::move(st)));
}

namespace {

struct HitSink {
  std::vector<std::vector<Window>>* windows;
  std::vector<uint32_t>* touched;
  const std::vector<CompiledRule>* rules;
};

// Records hit end `to` for rule `id` as the window [to - window, to], merged
// with the rule's previous window when they overlap. Vectorscan reports in
// end-offset order, so merging with the last window is almost always enough;
// Scan() sorts and merges again to be safe.
int OnHit(unsigned int id, unsigned long long /*from*/, unsigned long long to,
          unsigned int /*flags*/, void* ctx) {
  auto* sink = static_cast<HitSink*>(ctx);
  std::vector<Window>& w = (*sink->windows)[id];
  const uint64_t width = (*sink->rules)[id].window;
  const uint64_t begin = to > width ? to - width : 0;
  if (w.empty()) sink->touched->push_back(id);
  if (!w.empty() && begin <= w.back().end && to >= w.back().begin) {
    w.back().end = std::max<uint64_t>(w.back().end, to);
    w.back().begin = std::min(w.back().begin, begin);
  } else {
    w.push_back({begin, to});
  }
  return 0;
}

// The lines that hold data[begin, end), at most kLineContext bytes either
// side of it (a minified file can be one line of megabytes).
constexpr uint64_t kLineContext = 4096;
std::string_view LinesAround(std::string_view data, uint64_t begin, uint64_t end) {
  const uint64_t lo = begin > kLineContext ? begin - kLineContext : 0;
  uint64_t from = begin;
  while (from > lo && data[from - 1] != '\n') --from;
  const uint64_t hi = std::min<uint64_t>(data.size(), end + kLineContext);
  uint64_t to = end > begin && data[end - 1] == '\n' ? end - 1 : end;
  while (to < hi && data[to] != '\n') ++to;
  return data.substr(from, to - from);
}

bool IsGeneric(const Rule& r) { return r.id.starts_with("generic"); }

void SortAndMerge(std::vector<Window>* w) {
  std::sort(w->begin(), w->end(),
            [](const Window& a, const Window& b) { return a.begin < b.begin; });
  size_t out = 0;
  for (size_t i = 0; i < w->size(); ++i) {
    if (out > 0 && (*w)[i].begin <= (*w)[out - 1].end) {
      (*w)[out - 1].end = std::max((*w)[out - 1].end, (*w)[i].end);
    } else {
      (*w)[out++] = (*w)[i];
    }
  }
  w->resize(out);
}

}  // namespace

Status Detector::Scan(std::string_view data, Scratch* scratch, std::vector<Match>* out) const {
  return Scan(data, {}, scratch, out);
}

bool Detector::PathMatches(size_t rule, std::string_view path) const {
  const CompiledRule& cr = impl_->compiled[rule];
  if (!cr.path) return true;
  if (path.empty()) return false;
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  std::unique_ptr<pcre2_match_data, PcreMatchDataFree> guard(md);
  return pcre2_match(cr.path.get(), reinterpret_cast<PCRE2_SPTR>(path.data()), path.size(), 0, 0,
                     md, nullptr) >= 0;
}

void Detector::ScanPathRules(std::string_view path, uint64_t size, std::vector<Match>* out) const {
  // An empty file holds no key material.
  if (size == 0 || path.empty()) return;
  for (size_t r : impl_->path_only) {
    if (PathMatches(r, path)) out->push_back(Match{r, 0, size, 1});
  }
}

Status Detector::Scan(std::string_view data, std::string_view path, Scratch* scratch,
                      std::vector<Match>* out) const {
  Scratch::State& st = *scratch->state_;
  if (st.impl != impl_.get()) {
    return InvalidArgumentError("Detector::Scan: scratch belongs to another Detector");
  }
  for (uint32_t r : st.touched) st.windows[r].clear();
  st.touched.clear();
  const size_t first_new = out->size();
  ScanPathRules(path, data.size(), out);
  if (!impl_->db) return OkStatus();
  HitSink sink{&st.windows, &st.touched, &impl_->compiled};
  // Vectorscan's length is 32-bit; scan huge inputs in overlapping pieces.
  constexpr uint64_t kPiece = 1u << 30;
  const uint64_t size = data.size();
  for (uint64_t base = 0; base < size || base == 0; base += kPiece) {
    const uint64_t len = std::min<uint64_t>(size - base, kPiece + kMaxWindow);
    HitSink piece_sink = sink;
    // Offsets from a later piece are shifted by a wrapper context.
    struct Shifted {
      HitSink* sink;
      uint64_t base;
    } shifted{&piece_sink, base};
    auto cb = [](unsigned int id, unsigned long long from, unsigned long long to,
                 unsigned int flags, void* ctx) -> int {
      auto* s = static_cast<Shifted*>(ctx);
      return OnHit(id, from + s->base, to + s->base, flags, s->sink);
    };
    hs_error_t rc = hs_scan(impl_->db.get(), data.data() + base, static_cast<unsigned>(len), 0,
                            st.hs.get(), cb, &shifted);
    if (rc != HS_SUCCESS) {
      return InternalError("Vectorscan scan failed with code " + std::to_string(rc));
    }
    if (base + len >= size) break;
  }

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(data.data());
  std::vector<std::pair<uint64_t, uint64_t>> vetoed;  // spans specific rules allow-listed
  pcre2_match_data* md = st.md.get();
  pcre2_match_context* mc = st.mc.get();
  for (uint32_t r : st.touched) {
    const CompiledRule& cr = impl_->compiled[r];
    const Rule& rule = impl_->rules.rules[r];
    std::vector<Window>& windows = st.windows[r];
    if (cr.path && !PathMatches(r, path)) continue;
    SortAndMerge(&windows);
    uint64_t resume = 0;  // matches of one rule never overlap
    for (const Window& w : windows) {
      const uint64_t cut = std::min(size, w.end + kLookahead);
      uint64_t pos = std::max(w.begin, resume);
      while (pos <= w.end && pos <= cut) {
        int rc = pcre2_match(cr.code.get(), subject, cut, pos, 0, md, mc);
        if (rc < 0) break;  // no match, or a match/depth limit: nothing confirmed
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const uint64_t ms = ov[0];
        const uint64_t me = ov[1];
        if (ms > w.end) break;
        pos = me > ms ? me : ms + 1;
        if (me == cut && cut < size) continue;  // may depend on bytes past the cut
        resume = pos;
        uint64_t ss = ms;
        uint64_t se = me;
        const int g = cr.secret_group;
        if (g > 0 && rc > g && ov[2 * g] != PCRE2_UNSET) {
          ss = ov[2 * g];
          se = ov[2 * g + 1];
        } else if (g > 0) {
          // The secret group did not take part: use the first group that did.
          bool found = false;
          for (int k = 1; k < rc; ++k) {
            if (ov[2 * k] != PCRE2_UNSET && ov[2 * k + 1] > ov[2 * k]) {
              ss = ov[2 * k];
              se = ov[2 * k + 1];
              found = true;
              break;
            }
          }
          if (!found) continue;
        }
        if (se <= ss) continue;
        const std::string_view secret = data.substr(ss, se - ss);
        const std::string_view whole = data.substr(ms, me - ms);
        if (!rule.keywords.empty()) {
          bool any = false;
          for (const std::string& k : rule.keywords) {
            if (ContainsLowered(whole, k)) {
              any = true;
              break;
            }
          }
          if (!any) continue;
        }
        if (rule.entropy && ShannonEntropy(secret) < *rule.entropy) continue;
        // Allow-listed by the rule: a known example or a placeholder. A
        // specific rule's verdict also silences generic rules on these bytes.
        auto allowlisted = [&]() {
          if (Stopworded(impl_->global.stopwords, secret) ||
              Stopworded(cr.allowlist.stopwords, secret)) {
            return true;
          }
          // The allow-list match reuses the match data, so read the ovector first.
          if (AnyMatches(impl_->global.regexes, secret, md, mc) ||
              AnyMatches(cr.allowlist.regexes, secret, md, mc) ||
              AnyMatches(impl_->global.match_regexes, whole, md, mc) ||
              AnyMatches(cr.allowlist.match_regexes, whole, md, mc)) {
            return true;
          }
          if (!impl_->global.decoded_regexes.empty() || !cr.allowlist.decoded_regexes.empty()) {
            // Judged by what an encoded value says; the decoded text stays here.
            const std::optional<std::string> decoded = DecodedValue(secret);
            if (decoded && (AnyMatches(impl_->global.decoded_regexes, *decoded, md, mc) ||
                            AnyMatches(cr.allowlist.decoded_regexes, *decoded, md, mc))) {
              return true;
            }
          }
          const std::string_view lines = LinesAround(data, ms, me);
          return ContainsLowered(lines, kInlineAllow) ||
                 AnyMatches(impl_->global.line_regexes, lines, md, mc) ||
                 AnyMatches(cr.allowlist.line_regexes, lines, md, mc);
        };
        if (allowlisted()) {
          if (!IsGeneric(rule)) vetoed.emplace_back(ss, se);
          continue;
        }
        out->push_back(Match{r, ss, se, 0});
      }
    }
  }
  // A generic rule ("generic" id prefix) reports nothing where a specific
  // rule already found a secret overlapping the same bytes, or judged them
  // an allow-listed example.
  std::vector<std::pair<uint64_t, uint64_t>> specific = std::move(vetoed);
  for (size_t i = first_new; i < out->size(); ++i) {
    const Rule& rule = impl_->rules.rules[(*out)[i].rule];
    // A path-only finding spans the whole file; it says nothing about bytes.
    if (!IsGeneric(rule) && !rule.path_only()) {
      specific.emplace_back((*out)[i].start, (*out)[i].end);
    }
  }
  if (!specific.empty()) {
    auto overlaps_specific = [&](const Match& m) {
      if (!IsGeneric(impl_->rules.rules[m.rule])) return false;
      for (const auto& [s, e] : specific) {
        if (m.start < e && s < m.end) return true;
      }
      return false;
    };
    out->erase(std::remove_if(out->begin() + first_new, out->end(), overlaps_specific), out->end());
  }
  std::sort(out->begin() + first_new, out->end(), [](const Match& a, const Match& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.rule != b.rule) return a.rule < b.rule;
    return a.end < b.end;
  });
  // Line numbers in one pass over the sorted starts.
  uint64_t line = 1;
  uint64_t at = 0;
  for (size_t i = first_new; i < out->size(); ++i) {
    Match& m = (*out)[i];
    while (at < m.start) {
      const void* nl = std::memchr(data.data() + at, '\n', m.start - at);
      if (nl == nullptr) {
        at = m.start;
        break;
      }
      ++line;
      at = static_cast<const char*>(nl) - data.data() + 1;
    }
    m.line = line;
  }
  return OkStatus();
}

bool Detector::PathAllowlisted(size_t rule, std::string_view path) const {
  pcre2_match_data* md = pcre2_match_data_create(impl_->max_groups, nullptr);
  std::unique_ptr<pcre2_match_data, PcreMatchDataFree> guard(md);
  if (AnyMatches(impl_->global.paths, path, md, nullptr)) return true;
  return rule < impl_->compiled.size() &&
         AnyMatches(impl_->compiled[rule].allowlist.paths, path, md, nullptr);
}

}  // namespace gatos::scan
