// make_seeds.cpp — writes the seed corpora of the fuzz targets with the
// library itself: small valid files of every format, each in the input form
// its target reads (a sparse image of a pool, or a checkpoint file as it is),
// into DIR/<target>/. Run by the build (fuzz/CMakeLists.txt); no binary
// corpus is kept in the repository.
//
//   cairn_fuzz_seeds DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/amr/snapshot.hpp"
#include "apps/workflow/progress.hpp"
#include "cairn/extended/pool.hpp"
#include "cairn/octree.hpp"
#include "cairn/persist.hpp"
#include "cairn/stream.hpp"
#include "dist/files.hpp"
#include "dist/heartbeat.hpp"
#include "fuzz_support.hpp"

namespace {

namespace fs = std::filesystem;
using cairn::fuzz::scratch_dir;

std::string out_dir;
int written = 0;

template <class T>
T must(cairn::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "cairn_fuzz_seeds: %s: %s\n", what, r.error().message.c_str());
    std::exit(1);
  }
  return std::move(r).value();
}
void must(cairn::Result<void> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "cairn_fuzz_seeds: %s: %s\n", what, r.error().message.c_str());
    std::exit(1);
  }
}

void emit(const std::string& target, const std::string& name, const std::vector<std::uint8_t>& bytes) {
  const std::string dir = out_dir + "/" + target;
  fs::create_directories(dir);
  cairn::fuzz::write_file(dir + "/seed-" + name, bytes);
  ++written;
}

// A pool file as its target's input: the sparse image, checksums fixed by the
// harness (flags bit 0) and, where the target reads more flags, those too.
void emit_image(const std::string& target, const std::string& name, const std::string& file, std::uint8_t flags) {
  emit(target, name, cairn::fuzz::encode_sparse_image(cairn::fuzz::read_file(file), flags));
}

void pool_seeds() {
  const std::string path = scratch_dir() + "/seed.pool";
  {
    cairn::pool::CreateOptions o;
    o.size = cairn::pool::kMinPoolSize;
    auto pool = must(cairn::pool::Pool::create(path, std::move(o)), "creating a pool");
    emit_image("pool_fuzz", "empty", path, cairn::fuzz::kFixPoolChecksums);
    pool->arena().reset_empty();
    for (unsigned slot : {0u, 3u, 15u}) {
      const auto off = must(pool->arena().alloc(3000 + 2000 * slot), "allocating");
      pool->memset_persist(pool->at(off), static_cast<int>(0x11 * (slot + 1)), 64);  // a small seed
      must(pool->publish_root(slot, off, slot + 1), "publishing a root");
    }
  }
  emit_image("pool_fuzz", "three-roots", path, cairn::fuzz::kFixPoolChecksums);
  emit_image("pool_fuzz", "three-roots-unfixed", path, 0);
  fs::remove(path);
}

void stream_seeds() {
  const std::string path = scratch_dir() + "/seed-streams.pool";
  const std::string uri = "pmem:" + path + "#";
  cairn::stream::OpenOptions o;
  o.pool_size = 2ull << 20;
  o.size_hint = 4096;
  for (const char* text : {"first version of a\n", "second version of a, a little longer\n"}) {
    auto w = must(cairn::stream::Stream::open(uri + "a", cairn::stream::Mode::write, o), "opening stream a");
    std::fputs(text, w->file());
    must(w->close(), "committing stream a");
  }
  emit_image("stream_fuzz", "one-stream", path, cairn::fuzz::kFixPoolChecksums);
  {
    auto w = must(cairn::stream::Stream::open(uri + "dir/b", cairn::stream::Mode::write, o), "opening stream b");
    for (int i = 0; i < 300; ++i) std::fputc(i * 7, w->file());
    must(w->close(), "committing stream b");
  }
  emit_image("stream_fuzz", "two-streams", path, cairn::fuzz::kFixPoolChecksums);
  emit_image("stream_fuzz", "two-streams-remove", path, cairn::fuzz::kFixPoolChecksums | 2);
  fs::remove(path);
}

void octree_seeds() {
  const std::string path = scratch_dir() + "/seed-tree.pool";
  struct Shape {
    int dims;
    unsigned size_index;
    bool keep_previous;
    const char* name;
  };
  for (const Shape& s : {Shape{3, 1, false, "octree-8"}, Shape{2, 2, true, "quadtree-16-keep-previous"},
                         Shape{3, 0, true, "octree-0-keep-previous"}}) {
    cairn::octree::Options o;
    o.dims = s.dims;
    o.data_size = cairn::fuzz::kOctreeDataSizes[s.size_index];
    o.pool_size = cairn::fuzz::kOctreePoolBytes;
    o.keep_previous = s.keep_previous;
    o.background_gc = false;
    o.dram_budget = 64u << 10;
    const auto init = [&](const cairn::octree::Octant& oc, std::byte* d, const std::byte*) {
      for (std::uint32_t i = 0; i < o.data_size; ++i) d[i] = static_cast<std::byte>(oc.x + oc.y + i);
    };
    {
      auto tree = must(cairn::octree::Octree::create(path, o), "creating a PM-octree");
      must(tree->uniform(1, init), "refining");
      must(tree->persist(), "persisting");
      must(
          tree->refine(
              false, [](const cairn::octree::Octant& oc, const std::byte*) { return oc.x == 0 && oc.y == 0; }, init, 3),
          "refining a corner");
      must(tree->persist(), "persisting again");
    }
    const std::uint8_t flags =
        static_cast<std::uint8_t>(cairn::fuzz::kFixPoolChecksums | (s.dims == 2 ? 2 : 0) | (s.size_index << 2));
    emit_image("octree_fuzz", s.name, path, flags);
    fs::remove(path);
  }
}

// Commits `commits` versions of the fuzz layout with `strategy`.
void write_state(const std::string& strategy, int commits) {
  auto ctx = must(cairn::persist::Context::create(cairn::fuzz::state_options(strategy)), "creating a context");
  const auto state = must(cairn::fuzz::open_state(*ctx), "opening the state");
  for (int c = 0; c < commits; ++c) {
    auto* p = state.p->as<std::uint8_t>();
    for (std::size_t i = 8; i < cairn::fuzz::kPlainBytes; ++i) p[i] = static_cast<std::uint8_t>(i + c);
    auto* u = state.u->write<std::uint8_t>();
    for (std::size_t i = 0; i < cairn::fuzz::kDualBytes; ++i) u[i] = static_cast<std::uint8_t>(3 * i + c);
    must(ctx->commit(), "committing");
  }
}

void slot_store_seeds() {
  for (unsigned i = 0; i < 4; ++i) {
    const std::string strategy = cairn::fuzz::kSlotStrategies[i];
    write_state(strategy, 2);
    emit_image("slot_store_fuzz", strategy, scratch_dir() + "/state.pool",
               static_cast<std::uint8_t>(cairn::fuzz::kFixPoolChecksums | (i << 1)));
    cairn::fuzz::clear_scratch();
  }
}

void file_checkpoint_seeds() {
  write_state("file", 1);
  emit("file_checkpoint_fuzz", "one-version", cairn::fuzz::read_file(scratch_dir() + "/state.1.ckpt"));
  cairn::fuzz::clear_scratch();
}

// A byte (the target's selector) before a file as it is.
std::vector<std::uint8_t> with_selector(std::uint8_t selector, const std::vector<std::uint8_t>& file) {
  std::vector<std::uint8_t> out{selector};
  out.insert(out.end(), file.begin(), file.end());
  return out;
}

// A payload of `bytes`, non-zero only at the start of each 4 KiB page (the
// sparse image of a slot file stays small).
std::vector<std::byte> payload(unsigned seed, std::size_t bytes) {
  std::vector<std::byte> p(bytes);
  for (std::size_t i = 0; i < p.size(); ++i)
    if (i % 4096 < 16) p[i] = static_cast<std::byte>((i * 131 + seed * 17) & 0xff);
  return p;
}

void dist_seeds() {
  using cairn::dist::detail::SlotFile;
  for (const auto kind : {SlotFile::Kind::partner, SlotFile::Kind::parity}) {
    const std::string path = scratch_dir() + "/copy.pool";
    {
      auto f = must(SlotFile::open(path, kind, 1, 0, 2, cairn::fuzz::kSlotPayloadBytes), "creating a slot file");
      for (std::uint64_t v : {3, 4}) {
        must(f->begin(v), "emptying a slot");
        const auto p = payload(static_cast<unsigned>(v), cairn::fuzz::kSlotPayloadBytes);
        std::memcpy(f->data(static_cast<int>(v % 2)), p.data(), p.size());
        must(
            f->publish(v, cairn::dist::detail::payload_checksum(cairn::dist::detail::block_hashes(p.data(), p.size()))),
            "publishing a slot");
      }
    }
    const bool parity = kind == SlotFile::Kind::parity;
    emit_image("dist_slot_fuzz", parity ? "parity" : "partner", path,
               static_cast<std::uint8_t>(cairn::fuzz::kFixPoolChecksums | (parity ? 2 : 0)));
    cairn::fuzz::clear_scratch();
  }
  {
    cairn::dist::detail::PfsFlusher flusher(scratch_dir(), "job", 0, 2);
    must(flusher.start(5, payload(5, cairn::fuzz::kFlushPayloadBytes)), "flushing a version");
    must(flusher.wait(), "flushing a version");
    emit("dist_files_fuzz", "flushed-version", with_selector(0, cairn::fuzz::read_file(flusher.file(5))));
    cairn::fuzz::clear_scratch();
  }
  const auto beat = cairn::dist::detail::heartbeat_record({12, 4242, 11, 250000000});
  const auto* b = reinterpret_cast<const std::uint8_t*>(&beat);
  emit("dist_files_fuzz", "heartbeat", with_selector(1, std::vector<std::uint8_t>(b, b + sizeof beat)));
}

void app_seeds() {
  const std::string progress = cairn::apps::workflow::format_progress(3, cairn::fuzz::kWorkflowSignature);
  emit("app_files_fuzz", "workflow-progress",
       with_selector(0, std::vector<std::uint8_t>(progress.begin(), progress.end())));
  auto tree = must(cairn::octree::Octree::create(scratch_dir() + "/amr.pool", cairn::fuzz::amr_options()),
                   "creating an in-core tree");
  must(tree->uniform(1, nullptr), "refining a tree");
  must(tree->refine(
           true, [](const cairn::octree::Octant& q, const std::byte*) { return q.x == 0 && q.y == 0; },
           [](const cairn::octree::Octant& q, std::byte* d, const std::byte*) {
             const double c = 0.125 * q.level;
             std::memcpy(d, &c, sizeof c);
           },
           3),
       "refining a tree");
  const auto snapshot = must(cairn::apps::amr::encode_snapshot(7, *tree), "writing a snapshot");
  emit("app_files_fuzz", "amr-snapshot", with_selector(1, snapshot));
  tree.reset();
  cairn::fuzz::clear_scratch();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  out_dir = argv[1];
  pool_seeds();
  stream_seeds();
  octree_seeds();
  slot_store_seeds();
  file_checkpoint_seeds();
  dist_seeds();
  app_seeds();
  std::printf("cairn_fuzz_seeds: %d seeds in %s\n", written, out_dir.c_str());
  return 0;
}
