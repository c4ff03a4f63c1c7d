// octree_c.cpp — the PM-octree part of the C API (cairn_octree_*, include/cairn/cairn.h) over cairn::octree.
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/cairn.h"
#include "cairn/octree.hpp"
#include "capi/c_error.hpp"

using cairn::capi::fail;
using cairn::capi::guard;
using cairn::capi::null_arg;
namespace co = cairn::octree;

struct cairn_octree {
  std::unique_ptr<co::Octree> tree;
};

namespace {

cairn_octant to_c(const co::Octant& o) { return {o.level, o.x, o.y, o.z}; }

co::Options to_cpp(const cairn_octree_options* o) {
  co::Options out;
  if (o == nullptr) return out;
  out.dims = o->dims;
  out.data_size = o->data_size;
  out.pool_size = o->pool_size;
  out.dram_budget = o->dram_budget;
  out.threshold_dram = o->threshold_dram;
  out.threshold_nvbm = o->threshold_nvbm;
  out.reserve_as_used = o->reserve_as_used != 0;
  out.keep_previous = o->keep_previous != 0;
  out.version = o->version;
  return out;
}

co::Octree::InitFn init_fn(cairn_octree_init_fn init, void* user) {
  if (init == nullptr) return {};
  return [=](const co::Octant& o, std::byte* d, const std::byte* p) {
    const cairn_octant c = to_c(o);
    init(&c, d, p, user);
  };
}

std::vector<const void*> payloads(std::span<const co::LeafView> family) {
  std::vector<const void*> v;
  for (const auto& l : family) v.push_back(l.data);
  return v;
}

template <class F>
int open_tree(const char* fn, const char* path, cairn_octree** out, F&& make) {
  return guard(fn, [&]() -> int {
    if (path == nullptr || out == nullptr) return null_arg(fn, "path or out is NULL");
    *out = nullptr;
    auto t = make();
    if (!t.ok()) return fail(fn, t.error());
    *out = new cairn_octree{std::move(t.value())};
    return 0;
  });
}

}  // namespace

extern "C" {

void cairn_octree_options_init(cairn_octree_options* o) {
  if (o == nullptr) return;
  const co::Options d;
  o->dims = d.dims;
  o->data_size = d.data_size;
  o->pool_size = d.pool_size;
  o->dram_budget = d.dram_budget;
  o->threshold_dram = d.threshold_dram;
  o->threshold_nvbm = d.threshold_nvbm;
  o->reserve_as_used = d.reserve_as_used ? 1 : 0;
  o->keep_previous = d.keep_previous ? 1 : 0;
  o->version = d.version;
}

int cairn_octree_create(const char* path, const cairn_octree_options* options, cairn_octree** out) {
  return open_tree("cairn_octree_create", path, out, [&] { return co::Octree::create(path, to_cpp(options)); });
}

int cairn_octree_restore(const char* path, const cairn_octree_options* options, cairn_octree** out) {
  return open_tree("cairn_octree_restore", path, out, [&] { return co::Octree::restore(path, to_cpp(options)); });
}

// Re-creating is allowed only where no durable data can be lost: the file
// is missing, or restore said "never persisted" and versions() agrees (a
// restore of a version the tree does not hold says no_version too, and that
// tree has durable versions).
int cairn_octree_open_or_create(const char* path, const cairn_octree_options* options, cairn_octree** out,
                                uint64_t* restored_version) {
  const char* fn = "cairn_octree_open_or_create";
  return guard(fn, [&]() -> int {
    if (path == nullptr || out == nullptr) return null_arg(fn, "path or out is NULL");
    *out = nullptr;
    if (restored_version != nullptr) *restored_version = 0;
    const co::Options o = to_cpp(options);
    auto restored = co::Octree::restore(path, o);
    if (restored.ok()) {
      if (restored_version != nullptr) *restored_version = restored.value()->version();
      *out = new cairn_octree{std::move(restored.value())};
      return 0;
    }
    const cairn::Errc why = restored.error().code;
    if (why == cairn::Errc::no_version) {
      co::Options latest = o;
      latest.version = 0;
      auto v = co::Octree::versions(path, latest);
      if (v.ok() || v.error().code != cairn::Errc::no_version) return fail(fn, restored.error());
      if (auto r = co::Octree::remove(path); !r.ok()) return fail(fn, r.error());
    } else if (why != cairn::Errc::not_found) {
      return fail(fn, restored.error());
    }
    auto created = co::Octree::create(path, o);
    if (!created.ok()) return fail(fn, created.error());
    *out = new cairn_octree{std::move(created.value())};
    return 0;
  });
}

int cairn_octree_versions(const char* path, const cairn_octree_options* options, uint64_t* committed,
                          uint64_t* previous) {
  return guard("cairn_octree_versions", [&]() -> int {
    if (path == nullptr) return null_arg("cairn_octree_versions", "path is NULL");
    co::Options o = to_cpp(options);
    o.version = 0;
    auto v = co::Octree::versions(path, o);
    if (!v.ok()) return fail("cairn_octree_versions", v.error());
    if (committed != nullptr) *committed = v.value().committed;
    if (previous != nullptr) *previous = v.value().previous;
    return 0;
  });
}

int cairn_octree_persist(cairn_octree* t, uint64_t* version) {
  return guard("cairn_octree_persist", [&]() -> int {
    if (t == nullptr) return null_arg("cairn_octree_persist", "tree is NULL");
    auto r = t->tree->persist();
    if (!r.ok()) return fail("cairn_octree_persist", r.error());
    if (version != nullptr) *version = r.value().version;
    return 0;
  });
}

int cairn_octree_close(cairn_octree** t) {
  if (t == nullptr) return null_arg("cairn_octree_close", "tree is NULL");
  delete *t;
  *t = nullptr;
  return 0;
}

int cairn_octree_remove(const char* path) {
  return guard("cairn_octree_remove", [&]() -> int {
    if (path == nullptr) return null_arg("cairn_octree_remove", "path is NULL");
    auto r = co::Octree::remove(path);
    return r.ok() ? 0 : fail("cairn_octree_remove", r.error());
  });
}

int cairn_octree_delete(cairn_octree** t) {
  return guard("cairn_octree_delete", [&]() -> int {
    if (t == nullptr || *t == nullptr) return null_arg("cairn_octree_delete", "tree is NULL");
    const std::string path = (*t)->tree->path();
    delete *t;
    *t = nullptr;
    auto r = co::Octree::remove(path);
    return r.ok() ? 0 : fail("cairn_octree_delete", r.error());
  });
}

int cairn_octree_uniform(cairn_octree* t, int level, cairn_octree_init_fn init, void* user) {
  return guard("cairn_octree_uniform", [&]() -> int {
    if (t == nullptr) return null_arg("cairn_octree_uniform", "tree is NULL");
    auto r = t->tree->uniform(level, init_fn(init, user));
    return r.ok() ? 0 : fail("cairn_octree_uniform", r.error());
  });
}

int cairn_octree_refine(cairn_octree* t, int recursive, int max_level, cairn_octree_refine_fn refine,
                        cairn_octree_init_fn init, void* user) {
  return guard("cairn_octree_refine", [&]() -> int {
    if (t == nullptr || refine == nullptr) return null_arg("cairn_octree_refine", "tree or refine is NULL");
    auto r = t->tree->refine(
        recursive != 0,
        [=](const co::Octant& o, const std::byte* d) {
          const cairn_octant c = to_c(o);
          return refine(&c, d, user) != 0;
        },
        init_fn(init, user), max_level);
    return r.ok() ? 0 : fail("cairn_octree_refine", r.error());
  });
}

int cairn_octree_coarsen(cairn_octree* t, int recursive, cairn_octree_coarsen_fn coarsen, cairn_octree_merge_fn merge,
                         void* user) {
  return guard("cairn_octree_coarsen", [&]() -> int {
    if (t == nullptr || coarsen == nullptr) return null_arg("cairn_octree_coarsen", "tree or coarsen is NULL");
    co::Octree::MergeFn m;
    if (merge != nullptr)
      m = [=](const co::Octant& p, std::byte* d, std::span<const co::LeafView> fam) {
        const cairn_octant c = to_c(p);
        const auto kids = payloads(fam);
        merge(&c, d, kids.data(), user);
      };
    auto r = t->tree->coarsen(
        recursive != 0,
        [=](const co::Octant& p, std::span<const co::LeafView> fam) {
          const cairn_octant c = to_c(p);
          const auto kids = payloads(fam);
          return coarsen(&c, kids.data(), user) != 0;
        },
        m);
    return r.ok() ? 0 : fail("cairn_octree_coarsen", r.error());
  });
}

int cairn_octree_balance(cairn_octree* t, int full, cairn_octree_init_fn init, void* user) {
  return guard("cairn_octree_balance", [&]() -> int {
    if (t == nullptr) return null_arg("cairn_octree_balance", "tree is NULL");
    auto r = t->tree->balance(full != 0 ? co::Connect::full : co::Connect::face, init_fn(init, user));
    return r.ok() ? 0 : fail("cairn_octree_balance", r.error());
  });
}

int cairn_octree_follow(cairn_octree* t, const void* root, cairn_octree_children_fn children, cairn_octree_init_fn init,
                        cairn_octree_follow_update_fn update, void* user) {
  return guard("cairn_octree_follow", [&]() -> int {
    if (t == nullptr || children == nullptr || update == nullptr)
      return null_arg("cairn_octree_follow", "tree, children or update is NULL");
    co::Octree::Follow fns;
    fns.children = [=](const co::Octant& o, const void* h, const void** out) {
      const cairn_octant c = to_c(o);
      return children(&c, h, out, user) != 0;
    };
    fns.init = init_fn(init, user);
    fns.update = [=](const co::Octant& o, const void* h, std::byte* d) {
      const cairn_octant c = to_c(o);
      return update(&c, h, d, user) != 0;
    };
    auto r = t->tree->follow(root, fns);
    return r.ok() ? 0 : fail("cairn_octree_follow", r.error());
  });
}

int cairn_octree_visit_leaves(const cairn_octree* t, cairn_octree_visit_fn visit, void* user) {
  return guard("cairn_octree_visit_leaves", [&]() -> int {
    if (t == nullptr || visit == nullptr) return null_arg("cairn_octree_visit_leaves", "tree or visit is NULL");
    auto r = t->tree->visit_leaves([=](const co::Octant& o, const std::byte* d) {
      const cairn_octant c = to_c(o);
      visit(&c, d, user);
    });
    return r.ok() ? 0 : fail("cairn_octree_visit_leaves", r.error());
  });
}

int cairn_octree_update_leaves(cairn_octree* t, cairn_octree_update_fn update, void* user) {
  return guard("cairn_octree_update_leaves", [&]() -> int {
    if (t == nullptr || update == nullptr) return null_arg("cairn_octree_update_leaves", "tree or update is NULL");
    auto r = t->tree->update_leaves([=](const co::Octant& o, std::byte* d) {
      const cairn_octant c = to_c(o);
      return update(&c, d, user) != 0;
    });
    return r.ok() ? 0 : fail("cairn_octree_update_leaves", r.error());
  });
}

// A cursor hands out the leaves of one batch of the C++ cursor per call at
// most, so a writable call's pointers are never those of an earlier batch
// (a C0 merge between batches may move blocks).
struct cairn_octree_leaves {
  std::optional<co::LeafCursor> read;
  std::optional<co::LeafWriter> write;
  std::vector<std::pair<co::Octant, std::byte*>> batch;
  std::size_t at = 0;
  bool done = false;
};

int cairn_octree_leaves_open(cairn_octree* t, int writable, cairn_octree_leaves** out) {
  return guard("cairn_octree_leaves_open", [&]() -> int {
    if (t == nullptr || out == nullptr) return null_arg("cairn_octree_leaves_open", "tree or out is NULL");
    auto c = std::make_unique<cairn_octree_leaves>();
    if (writable != 0)
      c->write.emplace(t->tree->write_leaves());
    else
      c->read.emplace(t->tree->leaves());
    *out = c.release();
    return 0;
  });
}

int cairn_octree_leaves_next(cairn_octree_leaves* c, cairn_octant* octants, void** data, size_t capacity,
                             size_t* count) {
  return guard("cairn_octree_leaves_next", [&]() -> int {
    if (c == nullptr || octants == nullptr || data == nullptr || count == nullptr)
      return null_arg("cairn_octree_leaves_next", "cursor, octants, data or count is NULL");
    *count = 0;
    if (c->at == c->batch.size() && !c->done) {
      c->batch.clear();
      c->at = 0;
      if (c->write) {
        auto b = c->write->next();
        if (!b.ok()) {
          c->done = true;
          return fail("cairn_octree_leaves_next", b.error());
        }
        for (const co::WritableLeaf& l : b.value()) c->batch.emplace_back(l.octant, l.data);
      } else {
        auto b = c->read->next();
        if (!b.ok()) {
          c->done = true;
          return fail("cairn_octree_leaves_next", b.error());
        }
        // Read-only leaves: handed out as const void* by the caller's contract (writable == 0).
        for (const co::LeafView& l : b.value()) c->batch.emplace_back(l.octant, const_cast<std::byte*>(l.data));
      }
      c->done = c->batch.empty();
    }
    std::size_t n = 0;
    for (; n < capacity && c->at < c->batch.size(); ++n, ++c->at) {
      octants[n] = to_c(c->batch[c->at].first);
      data[n] = c->batch[c->at].second;
    }
    *count = n;
    return 0;
  });
}

int cairn_octree_leaves_close(cairn_octree_leaves** c) {
  return guard("cairn_octree_leaves_close", [&]() -> int {
    if (c == nullptr) return null_arg("cairn_octree_leaves_close", "cursor is NULL");
    delete *c;
    *c = nullptr;
    return 0;
  });
}

int cairn_octree_checksum(const cairn_octree* t, uint64_t* out) {
  return guard("cairn_octree_checksum", [&]() -> int {
    if (t == nullptr || out == nullptr) return null_arg("cairn_octree_checksum", "tree or out is NULL");
    auto r = t->tree->checksum();
    if (!r.ok()) return fail("cairn_octree_checksum", r.error());
    *out = r.value();
    return 0;
  });
}

int cairn_octree_previous_checksum(const cairn_octree* t, uint64_t* out) {
  return guard("cairn_octree_previous_checksum", [&]() -> int {
    if (t == nullptr || out == nullptr) return null_arg("cairn_octree_previous_checksum", "tree or out is NULL");
    auto r = t->tree->previous_checksum();
    if (!r.ok()) return fail("cairn_octree_previous_checksum", r.error());
    *out = r.value();
    return 0;
  });
}

int cairn_octree_leaf_count(const cairn_octree* t, uint64_t* out) {
  return guard("cairn_octree_leaf_count", [&]() -> int {
    if (t == nullptr || out == nullptr) return null_arg("cairn_octree_leaf_count", "tree or out is NULL");
    auto r = t->tree->leaf_count();
    if (!r.ok()) return fail("cairn_octree_leaf_count", r.error());
    *out = r.value();
    return 0;
  });
}

int cairn_octree_root_read(const cairn_octree* t, void* out, size_t size) {
  const char* fn = "cairn_octree_root_read";
  return guard(fn, [&]() -> int {
    if (t == nullptr || (out == nullptr && size > 0)) return null_arg(fn, "tree or out is NULL");
    if (size > t->tree->data_size())
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  std::to_string(size) + " bytes asked of a root payload of " + std::to_string(t->tree->data_size()) +
                      " (the tree's data_size)");
    if (size > 0) std::memcpy(out, t->tree->root_data(), size);
    return 0;
  });
}

int cairn_octree_root_write(cairn_octree* t, const void* data, size_t size) {
  const char* fn = "cairn_octree_root_write";
  return guard(fn, [&]() -> int {
    if (t == nullptr || (data == nullptr && size > 0)) return null_arg(fn, "tree or data is NULL");
    if (size > t->tree->data_size())
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  std::to_string(size) + " bytes written to a root payload of " + std::to_string(t->tree->data_size()) +
                      " (the tree's data_size)");
    auto r = t->tree->update_root([&](const co::Octant&, std::byte* d) {
      if (size == 0 || std::memcmp(d, data, size) == 0) return false;
      std::memcpy(d, data, size);
      return true;
    });
    return r.ok() ? 0 : fail(fn, r.error());
  });
}

int cairn_octree_find_leaf(const cairn_octree* t, uint32_t x, uint32_t y, uint32_t z, cairn_octant* leaf,
                           const void** data) {
  const char* fn = "cairn_octree_find_leaf";
  return guard(fn, [&]() -> int {
    if (t == nullptr || leaf == nullptr) return null_arg(fn, "tree or leaf is NULL");
    auto r = t->tree->find_leaf(x, y, z);
    if (!r.ok()) {
      if (r.error().code != cairn::Errc::invalid_argument) return fail(fn, r.error());
      return fail(fn, CAIRN_E_INVALID_ARGUMENT,
                  "point (" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) +
                      ") outside the domain: coordinates below 2^CAIRN_OCTREE_MAX_LEVEL, z 0 in 2D");
    }
    *leaf = to_c(r.value().octant);
    if (data != nullptr) *data = r.value().data;
    return 0;
  });
}

int cairn_octree_stats_get(const cairn_octree* t, cairn_octree_stats* out) {
  const char* fn = "cairn_octree_stats_get";
  return guard(fn, [&]() -> int {
    if (t == nullptr || out == nullptr) return null_arg(fn, "tree or out is NULL");
    auto r = t->tree->stats();
    if (!r.ok()) return fail(fn, r.error());
    const co::Stats& s = r.value();
    *out = cairn_octree_stats{};
    out->leaves = s.leaves;
    out->octants = s.octants;
    out->blocks = s.blocks;
    out->dram_bytes = s.dram_bytes;
    out->nvm_bytes = s.nvm_bytes;
    out->shared_bytes = s.shared_bytes;
    out->version_bytes = s.version_bytes;
    out->block_bytes = s.block_bytes;
    out->pool_free_bytes = s.pool_free_bytes;
    out->free_blocks = s.free_blocks;
    out->chunk_blocks = s.chunk_blocks;
    out->committed_version = s.committed_version;
    out->previous_version = s.previous_version;
    out->previous_blocks = s.previous_blocks;
    out->depth = static_cast<uint64_t>(s.depth);
    out->c0_regions = s.c0_regions;
    out->merges = s.merges;
    out->nvm_store_lines = s.nvm_store_lines;
    out->gc_runs = s.gc_runs;
    return 0;
  });
}

int cairn_octree_verify(const cairn_octree* t) {
  return guard("cairn_octree_verify", [&]() -> int {
    if (t == nullptr) return null_arg("cairn_octree_verify", "tree is NULL");
    auto r = t->tree->verify();
    return r.ok() ? 0 : fail("cairn_octree_verify", r.error());
  });
}

uint64_t cairn_octree_version(const cairn_octree* t) { return t == nullptr ? 0 : t->tree->version(); }

int cairn_octree_gc(cairn_octree* t) {
  return guard("cairn_octree_gc", [&]() -> int {
    if (t == nullptr) return null_arg("cairn_octree_gc", "tree is NULL");
    auto r = t->tree->gc();
    return r.ok() ? 0 : fail("cairn_octree_gc", r.error());
  });
}

int cairn_octree_write_vtk(const cairn_octree* t, const char* path) {
  return guard("cairn_octree_write_vtk", [&]() -> int {
    if (t == nullptr || path == nullptr) return null_arg("cairn_octree_write_vtk", "tree or path is NULL");
    auto r = t->tree->write_vtk(path);
    return r.ok() ? 0 : fail("cairn_octree_write_vtk", r.error());
  });
}

}  // extern "C"
