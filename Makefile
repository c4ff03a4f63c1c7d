# The two commands of the README. Both install what is missing first.
#   make demo   build (release) and run the main demonstration
#   make test   build with address+undefined sanitizers and run every test
.PHONY: deps demo test build release debug tsan test-tsan bench format format-check clean

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

build: release

demo: release
	scripts/demo.sh build/release

# The crash suites run twice: a 10^5-state sample under the sanitizers, and
# the full 10^6 states (plus 10^5 per pool strategy, 10^5 file-system states
# for `file` and for undo-log) in the release build, where the harness is
# about ten times faster. Under the sanitizers undo-log runs only its broken
# variants: each of its states costs two libpmemobj opens (~0.3 s there).
CRASH_TESTS = crashsim_suite_test crashsim_fs_test crashsim_undo_log_test
test: debug
	@scripts/check-format.sh
	CAIRN_CRASH_STATES=100000 ctest --preset debug -E '^Crash/UndoLog\.'
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target $(CRASH_TESTS)
	ctest --preset release -R '^Crash/'

test-tsan: tsan
	ctest --preset tsan

bench: release
	build/release/tools/cairn/cairn bench device

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')

clean:
	rm -rf build
