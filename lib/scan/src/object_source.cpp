#include "gatos/scan/object_source.h"

#include "git/git_util.h"

namespace gatos::scan {
namespace {

git_object_t GitType(ObjectKind k) {
  switch (k) {
    case ObjectKind::kCommit:
      return GIT_OBJECT_COMMIT;
    case ObjectKind::kTree:
      return GIT_OBJECT_TREE;
    case ObjectKind::kBlob:
      return GIT_OBJECT_BLOB;
    case ObjectKind::kTag:
      return GIT_OBJECT_TAG;
  }
  return GIT_OBJECT_INVALID;
}

}  // namespace

Result<std::unique_ptr<ObjectSource>> ObjectSource::Open(const std::string& git_dir,
                                                         const PackStore* store,
                                                         size_t cache_bytes) {
  std::unique_ptr<ObjectSource> s(new ObjectSource());
  if (int rc = git_repository_open_bare(&s->repo_, git_dir.c_str()); rc != 0) {
    return git::GitError(rc, "opening " + git_dir + " for reading objects");
  }
  if (int rc = git_repository_odb(&s->odb_, s->repo_); rc != 0) {
    return git::GitError(rc, "opening the objects of " + git_dir);
  }
  s->store_ = store;
  if (store != nullptr && store->pack_count() > 0) {
    s->reader_ = std::make_unique<PackReader>(*store, cache_bytes);
  }
  return s;
}

ObjectSource::~ObjectSource() {
  git_odb_object_free(held_obj_);
  git_odb_free(odb_);
  git_repository_free(repo_);
}

std::optional<PackLocation> ObjectSource::Locate(const git_oid& oid) const {
  if (reader_ == nullptr) return std::nullopt;
  return store_->Find(oid.id);
}

Status ObjectSource::Size(const git_oid& oid, const std::optional<PackLocation>& loc,
                          ObjectKind want, uint64_t* size) {
  if (loc && reader_) {
    ObjectKind kind;
    if (reader_->Header(*loc, &kind, size).ok() && kind == want) return OkStatus();
  }
  ++fallbacks_;
  size_t len = 0;
  git_object_t type = GIT_OBJECT_INVALID;
  if (int rc = git_odb_read_header(&len, &type, odb_, &oid); rc != 0) {
    return git::GitError(rc,
                         std::string("reading ") + ObjectKindName(want) + " " + git::OidHex(oid));
  }
  if (type != GitType(want)) {
    return DataLossError(git::OidHex(oid) + " is not a " + ObjectKindName(want));
  }
  *size = len;
  return OkStatus();
}

Status ObjectSource::Read(const git_oid& oid, const std::optional<PackLocation>& loc,
                          ObjectKind want, uint64_t max_bytes, std::string_view* data) {
  held_.reset();
  git_odb_object_free(held_obj_);
  held_obj_ = nullptr;
  if (loc && reader_) {
    ObjectKind kind;
    if (reader_->Read(*loc, max_bytes, &kind, &held_).ok() && kind == want) {
      *data = *held_;
      return OkStatus();
    }
    held_.reset();
  }
  ++fallbacks_;
  if (int rc = git_odb_read(&held_obj_, odb_, &oid); rc != 0) {
    held_obj_ = nullptr;
    return git::GitError(rc,
                         std::string("reading ") + ObjectKindName(want) + " " + git::OidHex(oid));
  }
  if (git_odb_object_type(held_obj_) != GitType(want)) {
    return DataLossError(git::OidHex(oid) + " is not a " + ObjectKindName(want));
  }
  *data = std::string_view(static_cast<const char*>(git_odb_object_data(held_obj_)),
                           git_odb_object_size(held_obj_));
  return OkStatus();
}

Status ObjectSource::ReadShared(const git_oid& oid, const std::optional<PackLocation>& loc,
                                ObjectKind want, uint64_t max_bytes,
                                std::shared_ptr<const std::string>* data) {
  std::string_view view;
  GATOS_RETURN_IF_ERROR(Read(oid, loc, want, max_bytes, &view));
  if (held_) {
    *data = held_;
  } else {
    *data = std::make_shared<const std::string>(view);
  }
  return OkStatus();
}

}  // namespace gatos::scan
