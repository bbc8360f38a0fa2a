#include "gatos/git/ledger.h"

#include <fcntl.h>
#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gatos/crypto/sshsig.h"
#include "gatos/git/pack_writer.h"
#include "gatos/model/encoding.h"
#include "gatos/model/refs.h"
#include "gatos/sys/background_closer.h"
#include "git/git_util.h"

namespace gatos {

using git::GitError;
using git::OidHex;
using git::ParseOid;

namespace {
git_repository* Repo(void* p) { return static_cast<git_repository*>(p); }

git_object_t ToGitType(ObjectType t) {
  switch (t) {
    case ObjectType::kCommit: return GIT_OBJECT_COMMIT;
    case ObjectType::kTree: return GIT_OBJECT_TREE;
    case ObjectType::kBlob: return GIT_OBJECT_BLOB;
  }
  return GIT_OBJECT_INVALID;
}
}  // namespace

void Ledger::DisableObjectCache() {
  git::EnsureInit();
  git_libgit2_opts(GIT_OPT_ENABLE_CACHING, 0);
}

Status Ledger::InitRepository(const std::string& path) {
  git::EnsureInit();
  git_repository* repo = nullptr;
  if (git_repository_init(&repo, path.c_str(), /*is_bare=*/1) != 0) {
    return GitError("init " + path);
  }
  git_repository_free(repo);
  return OkStatus();
}

Result<std::unique_ptr<Ledger>> Ledger::Open(const std::string& path) {
  git::EnsureInit();
  git_repository* repo = nullptr;
  int rc = git_repository_open_ext(&repo, path.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr);
  if (rc == GIT_ENOTFOUND) {
    return NotFoundError(path + ": not a git repository (create a ledger with 'gatosd init " + path + "')");
  }
  if (rc != 0) return GitError("open " + path);
  return std::unique_ptr<Ledger>(new Ledger(repo, path));
}

Result<std::unique_ptr<Ledger>> Ledger::OpenFromEnv() {
  git::EnsureInit();
  git_repository* repo = nullptr;
  if (git_repository_open_ext(&repo, nullptr, GIT_REPOSITORY_OPEN_FROM_ENV, nullptr) != 0) {
    return GitError("open repository from the hook environment");
  }
  const char* p = git_repository_path(repo);
  return std::unique_ptr<Ledger>(new Ledger(repo, p ? p : "."));
}

Result<std::unique_ptr<Ledger>> Ledger::OpenForHook(const std::string& path) {
  GATOS_ASSIGN_OR_RETURN(auto ledger, Open(path));
  const char* quarantine = std::getenv("GIT_QUARANTINE_PATH");
  if (quarantine && *quarantine) {
    git_odb* odb = nullptr;
    if (git_repository_odb(&odb, Repo(ledger->repo_)) != 0) return GitError("open object database of " + path);
    int rc = git_odb_add_disk_alternate(odb, quarantine);
    git_odb_free(odb);
    if (rc != 0) return GitError("read the push quarantine " + std::string(quarantine));
  }
  return ledger;
}

Ledger::Ledger(void* repo, std::string path) : repo_(repo), path_(std::move(path)) {}

Ledger::~Ledger() {
  closer_.reset();  // the replaced files it holds are closed first
  git_repository_free(Repo(repo_));
}

void Ledger::CloseReplacedInBackground() {
  if (!closer_) closer_ = std::make_unique<BackgroundCloser>();
}

Result<std::string> Ledger::ResolveRef(const std::string& name) {
  git_oid oid;
  int rc = git_reference_name_to_id(&oid, Repo(repo_), name.c_str());
  if (rc == GIT_ENOTFOUND) return std::string();
  if (rc != 0) return GitError("resolve " + name);
  return OidHex(oid);
}

Result<CommitInfo> Ledger::ReadCommit(const std::string& id) {
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(id));
  git_commit* raw = nullptr;
  int rc = git_commit_lookup(&raw, Repo(repo_), &oid);
  if (rc == GIT_ENOTFOUND) return NotFoundError("commit " + id + " not found");
  if (rc != 0) return GitError("read commit " + id);
  git::CommitPtr c(raw);
  CommitInfo info;
  info.id = id;
  info.tree = OidHex(*git_commit_tree_id(c.get()));
  for (unsigned i = 0; i < git_commit_parentcount(c.get()); ++i) {
    info.parents.push_back(OidHex(*git_commit_parent_id(c.get(), i)));
  }
  const char* msg = git_commit_message_raw(c.get());
  info.message = msg ? msg : "";
  info.time_s = git_commit_time(c.get());
  // git_commit_extract_signature reads the commit again to find a "gpgsig"
  // header line; a commit whose header has none (an unsigned lease commit)
  // skips that read: it would return GIT_ENOTFOUND.
  const char* header = git_commit_raw_header(c.get());
  const std::string_view h = header ? header : "";
  if (!h.starts_with("gpgsig ") && h.find("\ngpgsig ") == std::string_view::npos) {
    git_error_clear();
    return info;
  }
  git_buf sig = GIT_BUF_INIT, data = GIT_BUF_INIT;
  rc = git_commit_extract_signature(&sig, &data, Repo(repo_), &oid, nullptr);
  if (rc == 0) {
    info.signature.assign(sig.ptr, sig.size);
    info.signed_data.assign(data.ptr, data.size);
  } else if (rc != GIT_ENOTFOUND) {
    git_buf_dispose(&sig);
    git_buf_dispose(&data);
    return GitError("read signature of commit " + id);
  }
  git_error_clear();
  git_buf_dispose(&sig);
  git_buf_dispose(&data);
  return info;
}

bool Ledger::HasObject(const std::string& id) {
  auto oid = ParseOid(id);
  if (!oid.ok()) return false;
  git_odb* odb = nullptr;
  if (git_repository_odb(&odb, Repo(repo_)) != 0) return false;
  bool has = git_odb_exists(odb, &*oid) == 1;
  git_odb_free(odb);
  return has;
}

Result<std::vector<TreeEntry>> Ledger::ReadTree(const std::string& id) {
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(id));
  git_tree* raw = nullptr;
  int rc = git_tree_lookup(&raw, Repo(repo_), &oid);
  if (rc == GIT_ENOTFOUND) return NotFoundError("tree " + id + " not found");
  if (rc != 0) return GitError("read tree " + id);
  git::TreePtr t(raw);
  std::vector<TreeEntry> out;
  size_t n = git_tree_entrycount(t.get());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const git_tree_entry* e = git_tree_entry_byindex(t.get(), i);
    out.push_back({git_tree_entry_name(e), OidHex(*git_tree_entry_id(e)),
                   static_cast<uint32_t>(git_tree_entry_filemode_raw(e))});
  }
  return out;
}

namespace {
constexpr size_t kRecentBytes = 64 << 20;
}  // namespace

const GitObject* Ledger::Recent(const std::string& id) const {
  auto it = recent_.find(id);
  return it == recent_.end() ? nullptr : &it->second;
}

void Ledger::Remember(GitObject&& o) {
  if (o.data.size() > (1 << 20) || recent_.count(o.id)) return;
  recent_bytes_ += o.data.size() + 100;
  recent_order_.push_back(o.id);
  std::string id = o.id;
  recent_.emplace(std::move(id), std::move(o));
  while (recent_bytes_ > kRecentBytes && !recent_order_.empty()) {
    auto it = recent_.find(recent_order_.front());
    recent_bytes_ -= it->second.data.size() + 100;
    recent_.erase(it);
    recent_order_.pop_front();
  }
}

Result<std::string> Ledger::ReadBlob(const std::string& id, size_t max_bytes) {
  if (const GitObject* r = Recent(id)) {
    if (r->type != ObjectType::kBlob) return InvalidArgumentError("object " + id + " is not a blob");
    if (r->data.size() > max_bytes) {
      return InvalidArgumentError("blob " + id + " is " + std::to_string(r->data.size()) +
                                  " bytes, over the limit of " + std::to_string(max_bytes));
    }
    return r->data;
  }
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(id));
  git_odb* odb_raw = nullptr;
  if (git_repository_odb(&odb_raw, Repo(repo_)) != 0) return GitError("open object database");
  git::OdbPtr odb(odb_raw);
  // Check the size from the header first so a huge blob is never loaded.
  size_t len = 0;
  git_object_t type;
  int rc = git_odb_read_header(&len, &type, odb.get(), &oid);
  if (rc == GIT_ENOTFOUND) return NotFoundError("blob " + id + " not found");
  if (rc != 0) return GitError("read blob header " + id);
  if (type != GIT_OBJECT_BLOB) return InvalidArgumentError("object " + id + " is not a blob");
  if (len > max_bytes) {
    return InvalidArgumentError("blob " + id + " is " + std::to_string(len) +
                                " bytes, over the limit of " + std::to_string(max_bytes));
  }
  git_odb_object* obj = nullptr;
  if (git_odb_read(&obj, odb.get(), &oid) != 0) return GitError("read blob " + id);
  std::string data(static_cast<const char*>(git_odb_object_data(obj)), git_odb_object_size(obj));
  git_odb_object_free(obj);
  return data;
}

Result<std::string> Ledger::ReadFileAtCommit(const std::string& commit_id, const std::string& path,
                                             size_t max_bytes) {
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(commit_id));
  git_commit* c_raw = nullptr;
  int rc = git_commit_lookup(&c_raw, Repo(repo_), &oid);
  if (rc == GIT_ENOTFOUND) return NotFoundError("commit " + commit_id + " not found");
  if (rc != 0) return GitError("read commit " + commit_id);
  git::CommitPtr c(c_raw);
  git_tree* t_raw = nullptr;
  if (git_commit_tree(&t_raw, c.get()) != 0) return GitError("read tree of " + commit_id);
  git::TreePtr t(t_raw);
  git_tree_entry* e_raw = nullptr;
  rc = git_tree_entry_bypath(&e_raw, t.get(), path.c_str());
  if (rc == GIT_ENOTFOUND) {
    git_error_clear();
    return NotFoundError(path + " not found in commit " + commit_id);
  }
  if (rc != 0) return GitError("look up " + path + " in " + commit_id);
  std::unique_ptr<git_tree_entry, decltype(&git_tree_entry_free)> e(e_raw, git_tree_entry_free);
  if (git_tree_entry_type(e.get()) != GIT_OBJECT_BLOB) {
    return InvalidArgumentError(path + " in commit " + commit_id + " is not a file");
  }
  return ReadBlob(OidHex(*git_tree_entry_id(e.get())), max_bytes);
}

Result<std::pair<ObjectType, std::string>> Ledger::ReadRawObject(const std::string& id) {
  if (const GitObject* r = Recent(id)) return std::make_pair(r->type, r->data);
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(id));
  git_odb* odb_raw = nullptr;
  if (git_repository_odb(&odb_raw, Repo(repo_)) != 0) return GitError("open object database");
  git::OdbPtr odb(odb_raw);
  git_odb_object* obj = nullptr;
  int rc = git_odb_read(&obj, odb.get(), &oid);
  if (rc == GIT_ENOTFOUND) return NotFoundError("object " + id + " not found");
  if (rc != 0) return GitError("read object " + id);
  ObjectType t;
  switch (git_odb_object_type(obj)) {
    case GIT_OBJECT_COMMIT: t = ObjectType::kCommit; break;
    case GIT_OBJECT_TREE: t = ObjectType::kTree; break;
    case GIT_OBJECT_BLOB: t = ObjectType::kBlob; break;
    default:
      git_odb_object_free(obj);
      return InvalidArgumentError("object " + id + " is a tag; not used by the ledger");
  }
  std::string data(static_cast<const char*>(git_odb_object_data(obj)), git_odb_object_size(obj));
  git_odb_object_free(obj);
  return std::make_pair(t, std::move(data));
}

Result<std::string> Ledger::WriteRawObject(ObjectType type, std::string_view data) {
  git_odb* odb_raw = nullptr;
  if (git_repository_odb(&odb_raw, Repo(repo_)) != 0) return GitError("open object database");
  git::OdbPtr odb(odb_raw);
  git_oid oid;
  if (git_odb_write(&oid, odb.get(), data.data(), data.size(), ToGitType(type)) != 0) {
    return GitError("write object");
  }
  return OidHex(oid);
}

Result<std::string> Ledger::WriteBlob(std::string_view data) {
  git_oid oid;
  if (git_blob_create_from_buffer(&oid, Repo(repo_), data.data(), data.size()) != 0) {
    return GitError("write blob");
  }
  return OidHex(oid);
}

Result<std::string> Ledger::WriteTree(std::vector<TreeEntry> entries) {
  git_treebuilder* raw = nullptr;
  if (git_treebuilder_new(&raw, Repo(repo_), nullptr) != 0) return GitError("new tree builder");
  std::unique_ptr<git_treebuilder, decltype(&git_treebuilder_free)> tb(raw, git_treebuilder_free);
  for (const auto& e : entries) {
    GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(e.id));
    if (git_treebuilder_insert(nullptr, tb.get(), e.name.c_str(), &oid,
                               static_cast<git_filemode_t>(e.mode)) != 0) {
      return GitError("tree entry " + e.name);
    }
  }
  git_oid out;
  if (git_treebuilder_write(&out, tb.get()) != 0) return GitError("write tree");
  return OidHex(out);
}

Result<std::string> Ledger::WriteCommit(const std::string& tree,
                                        const std::vector<std::string>& parents,
                                        const std::string& message,
                                        const Ed25519PrivateKey* key, const std::string& name,
                                        const std::string& email, int64_t time_ms) {
  if (tree == kEmptyTreeId && !HasObject(tree)) {
    GATOS_RETURN_IF_ERROR(WriteTree({}).status());
  }
  GATOS_ASSIGN_OR_RETURN(git_oid tree_oid, ParseOid(tree));
  git_tree* t_raw = nullptr;
  if (git_tree_lookup(&t_raw, Repo(repo_), &tree_oid) != 0) return GitError("tree " + tree);
  git::TreePtr t(t_raw);
  std::vector<git::CommitPtr> parent_objs;
  std::vector<const git_commit*> parent_ptrs;
  for (const auto& p : parents) {
    GATOS_ASSIGN_OR_RETURN(git_oid poid, ParseOid(p));
    git_commit* c = nullptr;
    if (git_commit_lookup(&c, Repo(repo_), &poid) != 0) return GitError("parent commit " + p);
    parent_objs.emplace_back(c);
    parent_ptrs.push_back(c);
  }
  git_signature* sig_raw = nullptr;
  if (git_signature_new(&sig_raw, name.c_str(), email.c_str(), time_ms / 1000, 0) != 0) {
    return GitError("signature for " + name);
  }
  std::unique_ptr<git_signature, decltype(&git_signature_free)> who(sig_raw, git_signature_free);
  git_oid out;
  if (!key) {
    if (git_commit_create(&out, Repo(repo_), nullptr, who.get(), who.get(), nullptr,
                          message.c_str(), t.get(), parent_ptrs.size(), parent_ptrs.data()) != 0) {
      return GitError("create commit");
    }
    return OidHex(out);
  }
  git_buf buf = GIT_BUF_INIT;
  if (git_commit_create_buffer(&buf, Repo(repo_), who.get(), who.get(), nullptr, message.c_str(),
                               t.get(), parent_ptrs.size(), parent_ptrs.data()) != 0) {
    return GitError("build commit");
  }
  std::string content(buf.ptr, buf.size);
  git_buf_dispose(&buf);
  return git::WriteSignedCommitBuffer(Repo(repo_), content, *key, path_);
}

Status Ledger::UpdateRefs(const std::vector<RefUpdate>& updates, std::string_view why) {
  git_transaction* raw = nullptr;
  if (git_transaction_new(&raw, Repo(repo_)) != 0) return GitError("begin ref transaction");
  std::unique_ptr<git_transaction, decltype(&git_transaction_free)> tx(raw, git_transaction_free);
  for (const auto& u : updates) {
    int rc = git_transaction_lock_ref(tx.get(), u.name.c_str());
    if (rc == GIT_ELOCKED || rc == GIT_EMODIFIED || rc == GIT_EEXISTS) {
      git_error_clear();
      return AbortedError(u.name + " is being updated by another writer");
    }
    if (rc != 0) return GitError("lock " + u.name);
    // With the lock held, the current value cannot change under us.
    GATOS_ASSIGN_OR_RETURN(std::string current, ResolveRef(u.name));
    if (current != u.old_id) {
      return AbortedError(u.name + " moved: expected " + (u.old_id.empty() ? "no ref" : u.old_id) +
                          ", found " + (current.empty() ? "no ref" : current));
    }
    std::string msg(why);
    if (u.new_id.empty()) {
      if (git_transaction_remove(tx.get(), u.name.c_str()) != 0) return GitError("delete " + u.name);
    } else {
      GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(u.new_id));
      if (git_transaction_set_target(tx.get(), u.name.c_str(), &oid, nullptr, msg.c_str()) != 0) {
        return GitError("set " + u.name);
      }
    }
  }
  if (git_transaction_commit(tx.get()) != 0) return GitError("commit ref transaction");
  return OkStatus();
}

Result<std::vector<std::string>> Ledger::ListRefs(const std::string& prefix) {
  git_reference_iterator* raw = nullptr;
  std::string glob = prefix + "*";
  if (git_reference_iterator_glob_new(&raw, Repo(repo_), glob.c_str()) != 0) {
    return GitError("list refs " + prefix);
  }
  std::unique_ptr<git_reference_iterator, decltype(&git_reference_iterator_free)> it(
      raw, git_reference_iterator_free);
  std::vector<std::string> out;
  const char* name = nullptr;
  int rc;
  while ((rc = git_reference_next_name(&name, it.get())) == 0) out.emplace_back(name);
  if (rc != GIT_ITEROVER) return GitError("iterate refs " + prefix);
  git_error_clear();
  return out;
}

Status Ledger::ForEachJob(const std::function<void(std::string_view job_hex)>& fn) {
  GATOS_ASSIGN_OR_RETURN(auto names, ListRefs(kJobsPrefix));
  const size_t plen = std::strlen(kJobsPrefix);
  for (const auto& n : names) {
    // refs/gatos/jobs/<64 hex>/job
    if (n.size() == plen + 64 + 4 && n.compare(plen + 64, 4, "/job") == 0) {
      fn(std::string_view(n).substr(plen, 64));
    }
  }
  return OkStatus();
}


Result<Policy> Ledger::ReadPolicy() {
  GATOS_ASSIGN_OR_RETURN(std::string id, ResolveRef(kPolicyRef));
  if (id.empty()) {
    return NotFoundError(path_ + " has no " + std::string(kPolicyRef) +
                         " (is it a ledger? create one with 'gatosd init')");
  }
  return ReadPolicyAt(id);
}

Result<Policy> Ledger::ReadPolicyAt(const std::string& commit_id) {
  constexpr size_t kMax = 4 << 20;
  Policy p;
  GATOS_ASSIGN_OR_RETURN(std::string settings, ReadFileAtCommit(commit_id, "policy.json", kMax));
  GATOS_ASSIGN_OR_RETURN(p.settings, ParsePolicySettings(settings));
  GATOS_ASSIGN_OR_RETURN(p.submitters_text, ReadFileAtCommit(commit_id, "submitters", kMax));
  GATOS_ASSIGN_OR_RETURN(p.workers_text, ReadFileAtCommit(commit_id, "workers", kMax));
  GATOS_ASSIGN_OR_RETURN(std::string ledger_pub, ReadFileAtCommit(commit_id, "ledger.pub", kMax));
  GATOS_ASSIGN_OR_RETURN(p.submitters, ParseAllowedSigners(p.submitters_text, "policy:submitters"));
  GATOS_ASSIGN_OR_RETURN(p.workers, ParseAllowedSigners(p.workers_text, "policy:workers"));
  auto ops = ReadFileAtCommit(commit_id, "operators", kMax);
  if (ops.ok()) {
    p.operators_text = *ops;
    GATOS_ASSIGN_OR_RETURN(p.operators, ParseAllowedSigners(p.operators_text, "policy:operators"));
  } else if (ops.status().code() != StatusCode::kNotFound) {
    return ops.status();
  }
  while (!ledger_pub.empty() && (ledger_pub.back() == '\n' || ledger_pub.back() == '\r')) {
    ledger_pub.pop_back();
  }
  GATOS_ASSIGN_OR_RETURN(p.ledger_key, ParseOpenSshPublicKey(ledger_pub));
  return p;
}

namespace {

std::string DirOf(const std::string& path) { return path.substr(0, path.rfind('/')); }

// Creates the directories of ref `name` that are missing, from the deepest
// up: usually only the last is, or none.
Status MakeRefDirs(const std::string& git_dir, const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return OkStatus();
  const std::string d = git_dir + "/" + name.substr(0, slash);
  if (::mkdir(d.c_str(), 0755) == 0 || errno == EEXIST) return OkStatus();
  if (errno != ENOENT) return ErrnoStatus("mkdir " + d);
  GATOS_RETURN_IF_ERROR(MakeRefDirs(git_dir, name.substr(0, slash)));
  if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + d);
  return OkStatus();
}

// Writes <ref>.lock exclusively; the caller renames or unlinks it.
Status WriteLock(const std::string& lock, const std::string& content, bool fsync) {
  int fd = ::open(lock.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return AbortedError(lock + " exists: the ref is being updated by another writer");
    return ErrnoStatus("create " + lock);
  }
  ssize_t n = ::write(fd, content.data(), content.size());
  bool ok = n == static_cast<ssize_t>(content.size()) && (!fsync || ::fdatasync(fd) == 0);
  Status st = ok ? OkStatus() : ErrnoStatus("write " + lock);
  ::close(fd);
  if (!ok) ::unlink(lock.c_str());
  return st;
}

// With `closer`, `path` opened so that what a rename, unlink or rmdir of it
// frees is freed when the closer's thread closes the descriptor (give it to
// closer->Close whatever happened; -1 without a closer or a file).
int HoldForCloser(BackgroundCloser* closer, const std::string& path) {
  return closer ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
}

// Removes empty directories between a deleted ref and refs/, as git does.
// With `closer`, each directory removed stays open until the closer's thread
// closes it (Ledger::CloseReplacedInBackground).
void PruneRefDirs(const std::string& git_dir, std::string name, BackgroundCloser* closer = nullptr) {
  while (true) {
    size_t slash = name.rfind('/');
    if (slash == std::string::npos) return;
    name.resize(slash);
    // refs/gatos/jobs stays, empty or not: the writer marks it once
    // (dir_layout.h) for the job directories created in it.
    if (name == "refs" || name == std::string_view(kJobsPrefix, sizeof(kJobsPrefix) - 2) ||
        name.rfind("refs/", 0) != 0) {
      return;
    }
    const std::string path = git_dir + "/" + name;
    const int held = HoldForCloser(closer, path);
    const bool removed = ::rmdir(path.c_str()) == 0;
    if (closer) closer->Close(held);
    if (!removed) return;  // still has entries
  }
}

}  // namespace

Status Ledger::AddConfigValue(const std::string& name, const std::string& value) {
  git_config* raw = nullptr;
  if (git_repository_config(&raw, Repo(repo_)) != 0) return GitError("open config");
  std::unique_ptr<git_config, decltype(&git_config_free)> cfg(raw, git_config_free);
  std::string re = "^";
  for (char c : value) {
    if (std::strchr(".^$*+?()[]{}|\\", c)) re += '\\';
    re += c;
  }
  re += "$";
  if (git_config_set_multivar(cfg.get(), name.c_str(), re.c_str(), value.c_str()) != 0) {
    return GitError("set config " + name);
  }
  return OkStatus();
}

bool Ledger::SetSpool(std::vector<std::string> dirs) {
  struct stat home, st;
  if (::stat(path_.c_str(), &home) != 0) return false;
  for (const auto& d : dirs) {
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_dev != home.st_dev) return false;
  }
  spool_ = std::move(dirs);
  spool_next_ = 0;
  return true;
}

std::string Ledger::NextSpoolDir() {
  if (spool_.empty()) return "";
  return spool_[spool_next_++ % spool_.size()];
}

Status Ledger::WriteObjectsPacked(const std::vector<const GitObject*>& objects, bool fsync, bool remember,
                                  DeferredSyncs* defer) {
  if (objects.empty()) return OkStatus();
  PackWriteOptions o;
  o.fsync = fsync;
  o.temp_dir = NextSpoolDir();
  if (fsync && defer) {
    defer->spool = o.temp_dir;
    o.deferred_dir_syncs = &defer->dirs;
  }
  std::string dir = path_;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  // No refresh here: libgit2 rescans objects/pack/ when a lookup misses,
  // and what the writer reads back soon is served from `recent_`.
  GATOS_RETURN_IF_ERROR(WritePack(dir, objects, o).status());
  if (remember) {
    for (const GitObject* obj : objects) Remember(GitObject(*obj));
  }
  return OkStatus();
}

namespace {
// Syncs the deferred directories but `done`, in order, and forgets them.
Status SyncDeferred(Ledger::DeferredSyncs* d, const std::string& done) {
  if (!d) return OkStatus();
  std::vector<std::string> dirs = std::move(d->dirs);
  d->dirs.clear();
  for (const auto& dir : dirs) {
    if (dir != done) GATOS_RETURN_IF_ERROR(FsyncDirectory(dir));
  }
  return OkStatus();
}
}  // namespace

Status Ledger::CasRef(const std::string& name, const std::string& old_id, const std::string& new_id,
                      bool fsync, DeferredSyncs* deferred) {
  // Whatever happens to the ref, the pack's names are made durable: a later
  // batch may find its objects present and not write them again.
  struct SyncOnExit {
    DeferredSyncs* d;
    ~SyncOnExit() { (void)SyncDeferred(d, ""); }
  } sync_on_exit{deferred};
  std::string dir = path_;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  GATOS_RETURN_IF_ERROR(MakeRefDirs(dir, name));
  const std::string file = dir + "/" + name;
  const std::string lock = file + ".lock";
  // The next value comes from the spool with or without fsync: its inode
  // is allocated there, not among the ones the ref's directory freed.
  const std::string spool = deferred && !deferred->spool.empty() ? deferred->spool : NextSpoolDir();
  if (spool.empty()) {
    GATOS_RETURN_IF_ERROR(WriteLock(lock, new_id + "\n", fsync));
    GATOS_RETURN_IF_ERROR(SyncDeferred(deferred, ""));
  } else {
    // The value is written (and made durable) in a file of the spool, then
    // linked as <ref>.lock: the lock is still taken exclusively (link fails
    // if it exists), and its inode comes from the spool's directory.
    const std::string value = spool + "/ref-" + std::to_string(getpid());
    ::unlink(value.c_str());  // left by a writer of this pid that died
    GATOS_RETURN_IF_ERROR(WriteLock(value, new_id + "\n", fsync));
    const int linked = ::link(value.c_str(), lock.c_str());
    const int err = errno;
    ::unlink(value.c_str());
    if (linked != 0) {
      if (err == EEXIST) return AbortedError(lock + " exists: the ref is being updated by another writer");
      errno = err;
      return ErrnoStatus("link " + lock);
    }
    // The spool's name is gone for good before the ref moves: a crash must
    // not leave the ref's file under two names with one link counted (no
    // journal), which the next start's cleanup of the spool would free. The
    // same sync covers the pack's temporary names; objects/pack follows.
    if (fsync) {
      GATOS_RETURN_IF_ERROR(FsyncDirectory(spool));
      GATOS_RETURN_IF_ERROR(SyncDeferred(deferred, spool));
    }
  }
  // With the lock held nobody else moves the ref (git and libgit2 take the
  // same lock), so the value read now is the value we replace.
  auto current = ResolveRef(name);
  if (!current.ok() || *current != old_id) {
    ::unlink(lock.c_str());
    if (!current.ok()) return current.status();
    return AbortedError(name + " moved: expected " + (old_id.empty() ? "no ref" : old_id) + ", found " +
                        (current->empty() ? "no ref" : *current));
  }
  // The old value's file stays open across the rename: its blocks are freed
  // when the last descriptor closes, on the closer's thread (a file system
  // mounted with `discard` waits for the device as it frees them).
  const int held = old_id.empty() ? -1 : HoldForCloser(closer_.get(), file);
  const bool renamed = ::rename(lock.c_str(), file.c_str()) == 0;
  Status st = renamed ? OkStatus() : ErrnoStatus("rename " + lock);
  if (closer_) closer_->Close(held);
  if (!renamed) {
    ::unlink(lock.c_str());
    return st;
  }
  if (fsync) GATOS_RETURN_IF_ERROR(FsyncDirectory(DirOf(file)));
  return OkStatus();
}

Status Ledger::SetViewRefs(const std::vector<std::pair<std::string, std::string>>& refs) {
  std::string dir = path_;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  const bool have_packed = ::stat((dir + "/packed-refs").c_str(), &st) == 0;
  std::vector<std::string> packed_deletes;
  // With a closer, a ref file this replaces or deletes stays open until the
  // closer's thread closes it (CloseReplacedInBackground).
  BackgroundCloser* closer = closer_.get();
  auto release = [closer](int fd) {
    if (closer) closer->Close(fd);
  };
  for (const auto& [name, id] : refs) {
    const std::string file = dir + "/" + name;
    const std::string lock = file + ".lock";
    if (id.empty()) {
      const int held = HoldForCloser(closer, file);
      const bool failed = ::unlink(file.c_str()) != 0 && errno != ENOENT;
      Status st = failed ? ErrnoStatus("delete " + file) : OkStatus();
      release(held);
      GATOS_RETURN_IF_ERROR(st);
      if (have_packed) packed_deletes.push_back(name);
      PruneRefDirs(dir, name, closer);
      continue;
    }
    bool fresh = false;  // its directory was just made: nothing to replace
    Status w = WriteLock(lock, id + "\n", false);
    if (!w.ok() && w.code() != StatusCode::kAborted) {
      // The ref's directories are created only when missing.
      GATOS_RETURN_IF_ERROR(MakeRefDirs(dir, name));
      fresh = true;
      w = WriteLock(lock, id + "\n", false);
    }
    if (w.code() == StatusCode::kAborted) {
      // A stale lock from a crashed writer: ours is the only writer of
      // these refs (the ledger's writer lock), so it can go.
      ::unlink(lock.c_str());
      w = WriteLock(lock, id + "\n", false);
    }
    GATOS_RETURN_IF_ERROR(w);
    const int held = fresh ? -1 : HoldForCloser(closer, file);
    const bool renamed = ::rename(lock.c_str(), file.c_str()) == 0;
    Status st = renamed ? OkStatus() : ErrnoStatus("rename " + lock);
    release(held);
    if (!renamed) {
      ::unlink(lock.c_str());
      return st;
    }
  }
  if (!packed_deletes.empty()) {
    git_transaction* raw = nullptr;
    if (git_transaction_new(&raw, Repo(repo_)) != 0) return GitError("begin ref transaction");
    std::unique_ptr<git_transaction, decltype(&git_transaction_free)> tx(raw, git_transaction_free);
    int queued = 0;
    for (const auto& name : packed_deletes) {
      git_oid oid;
      if (git_reference_name_to_id(&oid, Repo(repo_), name.c_str()) != 0) {
        git_error_clear();
        continue;  // was loose only: already gone
      }
      if (git_transaction_lock_ref(tx.get(), name.c_str()) != 0) return GitError("lock " + name);
      if (git_transaction_remove(tx.get(), name.c_str()) != 0) return GitError("delete " + name);
      ++queued;
    }
    if (queued && git_transaction_commit(tx.get()) != 0) return GitError("delete packed refs");
  }
  return OkStatus();
}

Result<std::vector<GitObject>> BuildPolicyCommit(const Policy& policy, const std::string& parent,
                                                 const std::string& message,
                                                 const Ed25519PrivateKey& signer, int64_t time_ms) {
  std::vector<GitObject> objects;
  auto blob = [&](std::string data) {
    objects.push_back(MakeObject(ObjectType::kBlob, std::move(data)));
    return objects.back().id;
  };
  std::vector<TreeEntry> entries = {{"ledger.pub", blob(policy.ledger_key.ToOpenSsh() + "\n")},
                                    {"policy.json", blob(SerializePolicySettings(policy.settings) + "\n")},
                                    {"submitters", blob(policy.submitters_text)},
                                    {"workers", blob(policy.workers_text)}};
  if (!policy.operators_text.empty()) entries.push_back({"operators", blob(policy.operators_text)});
  GATOS_ASSIGN_OR_RETURN(std::string tree, EncodeTree(entries));
  objects.push_back(MakeObject(ObjectType::kTree, std::move(tree)));
  std::string tree_id = objects.back().id;
  std::vector<std::string> parents;
  if (!parent.empty()) parents.push_back(parent);
  GATOS_ASSIGN_OR_RETURN(GitObject commit, BuildCommitObject(tree_id, parents, message, "gatos ledger",
                                                             "ledger@gatos.invalid", time_ms, &signer));
  objects.insert(objects.begin(), std::move(commit));
  return objects;
}

}  // namespace gatos
