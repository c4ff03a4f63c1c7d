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
	build/release/examples/pool_demo

test: debug
	@scripts/check-format.sh
	ctest --preset debug

test-tsan: tsan
	ctest --preset tsan

bench: release
	build/release/tools/cairn/cairn device bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')

clean:
	rm -rf build
