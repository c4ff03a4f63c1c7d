# bench_smoke_test.cmake — runs one `cairn bench` experiment at a tiny size and
# checks its exit status and the rows of its JSON (cmake -P; see CMakeLists.txt).
# -DCAIRN=<cairn binary> -DBENCH=overhead|placement|stream|workflow|octree|amr|gerris -DOUT=<json file>
if(BENCH STREQUAL "overhead")
  # 6 variants x 1 app x 1 profile x 1 thread count.
  set(args overhead --apps jacobi --size jacobi=32:6 --profiles dram --repeats 1)
  set(expect_rows 6)
  set(expect "\"variant\": \"in-place\"" "\"variant\": \"undo-log\"" "\"variant\": \"in-place-no-flush\""
             "\"median_goal_met\"")
elseif(BENCH STREQUAL "placement")
  # 6 variants x 2 kernels x 1 profile.
  set(args placement --size jacobi=32:6,jacobi-sharpen=64:4 --profiles dram --repeats 1 --threads 2)
  set(expect_rows 12)
  set(expect "\"app\": \"jacobi-sharpen\"" "\"variant\": \"pool-no-persist\"" "\"variant\": \"shadow\"")
elseif(BENCH STREQUAL "stream")
  # (DRAM + 3 persistence modes x 1 profile) x 4 kernels.
  get_filename_component(dir ${OUT} DIRECTORY)
  set(args stream --size 1M --profiles dram --repeats 1 --dir ${dir}/stream-smoke-pools)
  set(expect_rows 16)
  set(expect "\"kernel\": \"triad\"" "\"persistence\": \"nt\"" "\"persistence\": \"flush\"")
elseif(BENCH STREQUAL "workflow")
  # 4 couplings, one run each, equal checksums (else exit 1).
  set(args workflow --cycles 3 --level-max 6 --sweeps 10 --repeats 1)
  set(expect_rows 4)
  set(expect "\"coupling\": \"pmem\"" "\"coupling\": \"file-disk\"" "\"checksums_equal\": true")
elseif(BENCH STREQUAL "octree")
  # 12 operations at one tiny size (~7e3 leaves); p4est and PM-octree must hold
  # the same leaves (else "failed": true and exit 1), the restore must match.
  get_filename_component(dir ${OUT} DIRECTORY)
  set(args octree --levels 5:3 --repeats 1 --dir ${dir}/octree-smoke-pools)
  set(expect_rows 12)
  set(expect "\"op\": \"balance-face\"" "\"op\": \"save\"" "\"op\": \"load\"" "\"op\": \"balance-full\""
             "\"changed\": \"61%\"" "\"restore_equal\": true" "\"leaves_equal\": true" "\"goal\": ")
  set(reject "\"failed\": true")
elseif(BENCH STREQUAL "amr")
  # Every experiment at level 3: 6 rows of c0, 2 of transform, 3 of restart;
  # the variants of one size must end with the same checksum (else exit 1).
  get_filename_component(dir ${OUT} DIRECTORY)
  file(MAKE_DIRECTORY ${dir}/amr-smoke-pools)
  set(args amr --size 3 --sizes 3 --steps 12 --crash-at 12 --repeats 1 --dir ${dir}/amr-smoke-pools)
  set(expect_rows 11)
  set(expect "\"label\": \"in-core\"" "\"label\": \"out-of-core (lmdb)\"" "\"label\": \"transformation on\""
             "\"checksums_equal\": true" "\"overlap\": ")
elseif(BENCH STREQUAL "gerris")
  # -DMODULE=<libcairn2D.so> -DGERRIS=<gerris2D>: both cases at level 5, 12 steps, killed at step 7 (the
  # snapshot restart starts from step 0): 5 run and 5 restart rows each; every run must end as expected.
  set(args gerris --size shear2D=5:12,solid2D=5:12 --kill-at 7 --repeats 1 --module ${MODULE} --gerris ${GERRIS}
           --dir /dev/shm/cairn-smoke-gerris)
  set(expect_rows 20)
  set(expect "\"variant\": \"cairn-octree\"" "\"variant\": \"snapshot-binary\"" "\"kind\": \"restart\""
             "\"restore_s\": " "\"failed\": false")
  set(reject "\"error\": ")
else()
  message(FATAL_ERROR "BENCH must be overhead, placement, stream, workflow, octree, amr or gerris")
endif()
file(REMOVE ${OUT})
execute_process(COMMAND ${CAIRN} bench ${args} --quiet --json ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cairn bench ${BENCH} exited with ${rc}: ${err}")
endif()
file(READ ${OUT} json)
# Rows: one "variant" (overhead, placement, gerris), "kernel" (stream), "coupling" (workflow), "op"
# (octree) or "label" (amr; the others' rows carry a "label" too) key each.
if(BENCH STREQUAL "amr")
  string(REGEX MATCHALL "\"label\": " rows "${json}")
else()
  string(REGEX MATCHALL "\"(variant|kernel|coupling|op)\": " rows "${json}")
endif()
list(LENGTH rows n)
if(NOT n EQUAL expect_rows)
  message(FATAL_ERROR "${OUT}: ${n} rows, expected ${expect_rows}")
endif()
foreach(e IN LISTS expect)
  string(FIND "${json}" "${e}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${OUT}: no ${e}")
  endif()
endforeach()
# Every run verified: no failed run is recorded.
string(FIND "${json}" "\"verified_runs\": 0" bad)
string(FIND "${json}" "\"valid\": false" invalid)
set(rejected -1)
if(reject)
  string(FIND "${json}" "${reject}" rejected)
endif()
if(NOT bad EQUAL -1 OR NOT invalid EQUAL -1 OR NOT rejected EQUAL -1)
  message(FATAL_ERROR "${OUT}: a run failed")
endif()
message("cairn bench ${BENCH}: ${n} rows, all verified")
