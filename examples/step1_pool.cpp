// step1_pool.cpp — tutorial step 1 (C++): create a pool, allocate, write, persist, publish a root, reopen.
//
// This is the smallest complete use of a cairn pool. It shows the one rule
// everything else in cairn builds on:
//
//     make the data durable first, then publish the root that points to it.
//
// Publishing is the commit point: a single aligned 8-byte store. Whatever
// happens after it (a crash, a SIGKILL, a power loss on real NVM), the pool
// reopens with the root either before or after the publish, and whatever the
// root names was already durable when it was published.
//
// Run it:  build/release/examples/step1_pool
// The pool goes to $CAIRN_POOL_DIR (default /dev/shm/cairn). step1_pool.c is
// the same program written against the C API.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "cairn/extended/pool.hpp"

using cairn::pool::Pool;

// What we keep in the pool. It holds no pointers: persistent data refers to
// other persistent data by offset, because the pool maps at a different
// address every time it is opened.
struct Greeting {
  char text[64];
  std::uint64_t squares[100];
};

int main() {
  // 1. Where the pool lives. cairn never overwrites a file, so a pool left by
  //    an earlier run of this step is removed first.
  const std::string dir = cairn::pool::default_pool_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "step1: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  const std::string path = dir + "/step1.pool";
  std::filesystem::remove(path, ec);

  std::uint64_t offset = 0;
  {
    // 2. Create an 8 MiB pool. Failures are values (cairn::Result), with a
    //    message that names the file and says what to do.
    cairn::pool::CreateOptions options;
    options.size = 8u << 20;
    auto created = Pool::create(path, std::move(options));
    if (!created.ok()) {
      std::fprintf(stderr, "step1: %s\n", created.error().message.c_str());
      return 1;
    }
    Pool& pool = *created.value();
    std::printf("created %s: %zu bytes, is_pmem=%d, flush mode %s\n", path.c_str(), pool.size(), pool.is_pmem(),
                cairn::devices::flush_mode_name(pool.flush_mode()));

    // 3. Allocate an extent in the arena. We get an offset, not a pointer.
    auto got = pool.arena().alloc(sizeof(Greeting));
    if (!got.ok()) {
      std::fprintf(stderr, "step1: %s\n", got.error().message.c_str());
      return 1;
    }
    offset = got.value();
    auto* g = reinterpret_cast<Greeting*>(pool.at(offset));

    // 4. Write with ordinary stores. Nothing is durable yet: the data may
    //    still sit in the CPU caches.
    std::snprintf(g->text, sizeof g->text, "hello from step 1");
    for (std::uint64_t i = 0; i < 100; ++i) g->squares[i] = i * i;

    // 5. Persist: flush the cache lines and wait for them (flush + drain).
    pool.persist(g, sizeof *g);

    // 6. Publish: root slot 0 now names the greeting, as version 1. This is the
    //    commit point; it persists the root table itself.
    if (auto r = pool.publish_root(0, offset, 1); !r.ok()) {
      std::fprintf(stderr, "step1: %s\n", r.error().message.c_str());
      return 1;
    }
    std::printf("published root 0 -> offset %llu, version 1\n", static_cast<unsigned long long>(offset));
  }  // 7. The pool closes here (unmapped). Only what was persisted counts.

  // 8. Reopen, as a restarted program would, and find the data from the root.
  auto opened = Pool::open(path);
  if (!opened.ok()) {
    std::fprintf(stderr, "step1: %s\n", opened.error().message.c_str());
    return 1;
  }
  Pool& pool = *opened.value();
  const cairn::pool::RootSlot root = pool.root(0);
  const auto* g = reinterpret_cast<const Greeting*>(pool.at(root.offset));
  std::printf("reopened: root 0 -> offset %llu, version %llu, text \"%s\", squares[99] = %llu\n",
              static_cast<unsigned long long>(root.offset), static_cast<unsigned long long>(root.version), g->text,
              static_cast<unsigned long long>(g->squares[99]));

  // 9. The arena's allocation state is not stored: after open, its owner marks
  //    what the roots reach, and everything else is free again.
  auto rebuild = pool.arena().rebuild();
  if (!rebuild.mark(root.offset, sizeof(Greeting)).ok()) return 1;
  rebuild.finish();
  std::printf("arena rebuilt: %llu block(s) in use\n", static_cast<unsigned long long>(pool.arena().blocks_in_use()));

  bool ok = root.offset == offset && root.version == 1 && std::strcmp(g->text, "hello from step 1") == 0;
  for (std::uint64_t i = 0; i < 100; ++i) ok = ok && g->squares[i] == i * i;
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
