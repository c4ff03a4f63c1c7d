# The two commands of the README. Both install what is missing first.
#   make demo   build (release) and run the main demonstration
#   make test   build with address+undefined sanitizers and run every test
.PHONY: deps demo test test-crash build release debug tsan test-tsan fuzz-build fuzz ulfm test-ulfm bench format format-check clean

JOBS ?= 2

deps:
	@scripts/install-deps.sh

release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

debug: deps
	cmake --preset debug >/dev/null
	cmake --build --preset debug -j $(JOBS)

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)

# The libFuzzer targets of fuzz/ (clang-16) and their seed corpora; nothing else.
fuzz-build: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)

# The ULFM flavour: src/dist, jacobi-mpi and the in-job recovery tests against
# Open MPI 5 with ULFM (scripts/install-deps.sh puts it in build/ulfm-venv);
# nothing else (README: "Two MPI builds").
ulfm: deps
	cmake --preset ulfm >/dev/null
	cmake --build --preset ulfm -j $(JOBS) --target jacobi-mpi jacobi_ulfm_test

test-ulfm: ulfm
	ctest --preset ulfm -R '^JacobiUlfm\.'

build: release

demo: release
	scripts/demo.sh build/release

# `make test` runs, in order:
#  1. the whole suite under address+undefined sanitizers, with a 3*10^4-state
#     sample of the crash suites (undo-log: only its broken variants; each of
#     its states costs two libpmemobj opens, ~0.3 s under the sanitizers);
#  2. the crash suites in a release build, where the harness is about ten
#     times faster, at 20 % of their full scale: 2*10^5 states over the
#     reference structure and the pool protocol, 2*10^4 per pool strategy, per
#     file-system model for `file` and for undo-log's libpmemobj.
#     `make test-crash` runs the full scale (10^6: 13 minutes of tests on 2 cores);
#  3. a ThreadSanitizer share: the tests of the code that runs threads (the
#     worker pool behind the multi-threaded primitives, in-place's helper
#     flusher, incremental commit's write tracking, every strategy with two
#     threads, the apps' thread team, the stream layer's locks and staging
#     threads, the PM-octree's background collector, dist's flusher thread),
#     about 2 minutes with its build. The Gerris module's writer thread is not
#     in it: the module runs inside the gerris2D/gerris3D binaries, which are
#     not instrumented, and preloading the runtime into them fails
#     (integrations/gerris/CMakeLists.txt says how), so every sanitizer build
#     links the module without its sanitizer. `make tsan && make test-tsan` runs all
#     of it, the crash suites at 2*10^4 states (undo-log's crash suite, whose
#     share sizes assume at least 10^5 states and whose libpmemobj is not
#     instrumented, only in the release step above);
#  4. the fuzz targets (fuzz/README.md), built with clang-16: each one's
#     regression inputs, then FUZZ_CHECK_RUNS inputs (3000) drawn from its
#     seeds with a fixed libFuzzer seed, so that every machine runs the same
#     inputs, bounded by FUZZ_CHECK_SECONDS (about 2 minutes with the build);
#  5. the in-job recovery tests on the ULFM build (`make test-ulfm`: only the
#     library, src/dist, jacobi-mpi and jacobi_ulfm_test are built; 4 ranks
#     and 1 or 2 spares, real SIGKILLs; about 2 minutes with the build).
CRASH_TESTS = crashsim_suite_test crashsim_fs_test crashsim_undo_log_test
TSAN_SHARE_TARGETS = pool_test devices_test persist_in_place_test persist_incremental_test \
                     persist_conformance_test sph_verify_test stream_test octree_test dist_protection_test
TSAN_SHARE_TESTS = '^(Pool|PoolErrors|FaultDevice|EmulatedDevice|Persist|CopyStrategies|AllStrategies|Sph|Kinds/Streams|PmemStreams|MemStreams|Octree|PfsFlusher)'
TSAN_SHARE_SKIP = 'Durability/|BrokenVariant'
test: debug
	@scripts/check-format.sh
	CAIRN_CRASH_STATES=30000 ctest --preset debug -E '^Crash/UndoLog\.'
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target $(CRASH_TESTS)
	CAIRN_CRASH_STATES=200000 ctest --preset release -R '^Crash/'
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS) --target $(TSAN_SHARE_TARGETS)
	ctest --preset tsan -R $(TSAN_SHARE_TESTS) -E $(TSAN_SHARE_SKIP)
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	fuzz/run.sh check build/fuzz $(FUZZ_CHECK_SECONDS)
	cmake --preset ulfm >/dev/null
	cmake --build --preset ulfm -j $(JOBS) --target jacobi-mpi jacobi_ulfm_test
	ctest --preset ulfm -R '^JacobiUlfm\.'

# `make fuzz`: every fuzz target for FUZZ_SECONDS, growing its corpus in
# build/fuzz/fuzz/corpus/<target>/ (findings in build/fuzz/fuzz/findings/).
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 60
fuzz: fuzz-build
	fuzz/run.sh grow build/fuzz $(FUZZ_SECONDS)

test-crash: release
	ctest --preset release -R '^Crash/'

test-tsan: tsan
	CAIRN_CRASH_STATES=20000 ctest --preset tsan -E '^Crash/UndoLog\.'

bench: release
	build/release/tools/cairn/cairn bench device

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')

clean:
	rm -rf build
