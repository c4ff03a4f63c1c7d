# install_test.cmake — installs the build into a scratch prefix and builds
# examples/ out of the tree against it, both ways a user would: CMake's
# find_package(cairn CONFIG) and pkg-config; then runs what it built (a C++
# and a C program each way, against the shared library). Where cairn was
# built with MPI, the same for an MPI program (mpi/, on cairn::dist and
# cairn-dist), run at 2 ranks. Checks that the install wrote nothing outside
# the prefix. Runs as a user without privileges (as_user.sh, which sets
# CAIRN_INSTALL_TEST_USER), every tutorial step built and run out of the
# tree. cmake -P, with
#   -DBUILD_DIR=<cairn build> -DSOURCE_DIR=<cairn source> -DWORK=<scratch dir>
#   -DCC=<C compiler> -DCXX=<C++ compiler> -DFLAGS=<sanitizer flags or "">
#   -DMPIEXEC=<mpiexec> -DMPICXX=<MPI C++ compiler wrapper> (both "" without MPI)
#   -DGERRIS_MODULE_DIR=<Gerris's own module directory, or "">
# With MPI and gfortran, the C and Fortran MPI examples too (mpi_bindings/; the MPI C and Fortran
# wrappers are found beside MPICXX).
foreach(v BUILD_DIR SOURCE_DIR WORK CC CXX)
  if(NOT ${v})
    message(FATAL_ERROR "install_test: -D${v}= is required")
  endif()
endforeach()
separate_arguments(flag_list UNIX_COMMAND "${FLAGS}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_test: `${ARGN}` failed (${rc}):\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()

# What Gerris's own module directory holds before the install, to show that
# the install left it alone.
function(list_with_times dir out)
  set(listing "")
  if(dir)
    file(GLOB files ${dir}/*)
    foreach(f ${files})
      file(TIMESTAMP ${f} t "%s")
      list(APPEND listing "${f}@${t}")
    endforeach()
  endif()
  set(${out} "${listing}" PARENT_SCOPE)
endfunction()

# WORK itself may belong to a directory this user cannot write (as_user.sh):
# only what is inside it is cleared.
function(clear_work)
  file(GLOB inside LIST_DIRECTORIES true ${WORK}/* ${WORK}/.*)
  if(inside)
    file(REMOVE_RECURSE ${inside})
  endif()
endfunction()

# As a user without privileges, in a prefix of its own (as_user.sh).
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT DEFINED ENV{CAIRN_INSTALL_TEST_USER} OR uid STREQUAL "0")
  message(FATAL_ERROR "install_test: runs through tests/install/as_user.sh, as a user other than root (uid ${uid})")
endif()
message("install_test: as user $ENV{CAIRN_INSTALL_TEST_USER} (uid ${uid})")
file(MAKE_DIRECTORY ${WORK})
clear_work()
set(prefix ${WORK}/prefix)
list_with_times("${GERRIS_MODULE_DIR}" gerris_before)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# Nothing outside the prefix: every file the install wrote (its manifest) is
# under it, and Gerris's module directory is as it was.
file(STRINGS ${BUILD_DIR}/install_manifest.txt installed)
foreach(f ${installed})
  string(FIND "${f}" "${prefix}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "install_test: `cmake --install --prefix ${prefix}` wrote ${f}, outside the prefix")
  endif()
endforeach()
list_with_times("${GERRIS_MODULE_DIR}" gerris_after)
if(NOT gerris_before STREQUAL gerris_after)
  message(FATAL_ERROR "install_test: the install changed Gerris's module directory ${GERRIS_MODULE_DIR}")
endif()
foreach(f include/cairn/persist.hpp include/cairn/cairn.h include/cairn/extended/pool.hpp bin/cairn
          share/man/man1/cairn.1 share/man/man1/cairn-launch.1)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install_test: ${f} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE config ${prefix}/*/cairnConfig.cmake)
file(GLOB_RECURSE pc ${prefix}/*/cairn.pc)
file(GLOB_RECURSE shared ${prefix}/*/libcairn.so)
file(GLOB_RECURSE static ${prefix}/*/libcairn.a)
if(NOT config OR NOT pc OR NOT shared OR NOT static)
  message(FATAL_ERROR "install_test: missing package files (config '${config}', pc '${pc}', .so '${shared}', .a '${static}')")
endif()
get_filename_component(libdir ${shared} DIRECTORY)
# Nothing of the test machinery is installed.
file(GLOB_RECURSE leaked ${prefix}/*crashsim* ${prefix}/*_test*)
if(leaked)
  message(FATAL_ERROR "install_test: test machinery was installed: ${leaked}")
endif()

set(env ${CMAKE_COMMAND} -E env CAIRN_POOL_DIR=${WORK}/pools)

# 1. find_package(cairn CONFIG): examples/ as its own project.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${WORK}/cmake-build -G Ninja -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_C_FLAGS=${FLAGS}" "-DCMAKE_CXX_FLAGS=${FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
# Every step of the tutorial, in C++ and in C (step 8, on MPI, below).
set(steps step1_pool step2_resilient_loop step3_kill_and_resume step4_strategies step5_pointers step6_streams
          step7_octree)
set(step_targets "")
foreach(step ${steps})
  list(APPEND step_targets ${step} ${step}_c)
endforeach()
run(${CMAKE_COMMAND} --build ${WORK}/cmake-build --target ${step_targets})
foreach(t ${step_targets})
  run(${env} ${WORK}/cmake-build/${t})
endforeach()
# The installed tool runs the installed apps (<prefix>/<libexecdir>/cairn), not the build tree's.
execute_process(COMMAND ${env} CAIRN_APPS_DIR= ${prefix}/bin/cairn run --list RESULT_VARIABLE rc OUTPUT_VARIABLE listed)
if(NOT rc EQUAL 0 OR NOT listed MATCHES "jacobi\n" OR NOT listed MATCHES "sph\n")
  message(FATAL_ERROR "install_test: `cairn run --list` from the install (${rc}):\n${listed}")
endif()
execute_process(COMMAND ${env} ${prefix}/bin/cairn run jacobi --size 48 --iterations 20 --strategy in-place
                        --dir ${WORK}/pools --quiet RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "VERIFIED")
  message(FATAL_ERROR "install_test: `cairn run jacobi` from the install (${rc}):\n${out}\n${err}")
endif()

# 2. pkg-config: one C and one C++ program compiled by hand.
set(ENV{PKG_CONFIG_PATH} ${libdir}/pkgconfig)
execute_process(COMMAND pkg-config --cflags --libs cairn RESULT_VARIABLE rc OUTPUT_VARIABLE pkg
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install_test: pkg-config --cflags --libs cairn failed")
endif()
separate_arguments(pkg_list UNIX_COMMAND "${pkg}")
file(MAKE_DIRECTORY ${WORK}/pc)
run(${CC} -std=c11 ${flag_list} ${SOURCE_DIR}/examples/step5_pointers.c -o ${WORK}/pc/step5_c ${pkg_list}
    -Wl,-rpath,${libdir})
run(${CXX} -std=c++20 ${flag_list} ${SOURCE_DIR}/examples/step5_pointers.cpp -o ${WORK}/pc/step5 ${pkg_list}
    -Wl,-rpath,${libdir})
run(${env} ${WORK}/pc/step5_c)
run(${env} ${WORK}/pc/step5)

# 3. MPI: mpi/dist_program built with find_package(cairn CONFIG REQUIRED
# COMPONENTS dist) and with `mpicxx ... $(pkg-config --libs cairn-dist)`, each
# run twice at 2 ranks, the second run resuming from the first's version.
if(MPIEXEC)
  file(GLOB_RECURSE dist_shared ${prefix}/*/libcairn_dist.so)
  file(GLOB_RECURSE dist_static ${prefix}/*/libcairn_dist.a)
  file(GLOB_RECURSE dist_pc ${prefix}/*/cairn-dist.pc)
  if(NOT dist_shared OR NOT dist_static OR NOT dist_pc)
    message(FATAL_ERROR "install_test: the MPI layer was not installed (.so '${dist_shared}', .a '${dist_static}', "
                        "pc '${dist_pc}')")
  endif()
  # Open MPI as root, more ranks than cores, no leak report from the ranks
  # (tests/support/mpirun_env.hpp says why).
  set(mpirun ${env} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
             ASAN_OPTIONS=detect_leaks=0 ${MPIEXEC} -n 2)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/mpi -B ${WORK}/mpi-build -G Ninja -DCMAKE_PREFIX_PATH=${prefix}
      -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
  run(${CMAKE_COMMAND} --build ${WORK}/mpi-build)
  run(${mpirun} ${WORK}/mpi-build/dist_program ${WORK}/mpi-cmake 3)
  run(${mpirun} ${WORK}/mpi-build/dist_program ${WORK}/mpi-cmake 6)

  if(NOT MPICXX)
    message(FATAL_ERROR "install_test: no MPI C++ compiler wrapper (-DMPICXX=) to build with cairn-dist.pc")
  endif()
  execute_process(COMMAND pkg-config --cflags --libs cairn-dist RESULT_VARIABLE rc OUTPUT_VARIABLE pkg
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_test: pkg-config --cflags --libs cairn-dist failed")
  endif()
  separate_arguments(pkg_list UNIX_COMMAND "${pkg}")
  run(${MPICXX} -std=c++20 ${flag_list} ${SOURCE_DIR}/tests/install/mpi/dist_program.cpp -o ${WORK}/pc/dist_program
      ${pkg_list} -Wl,-rpath,${libdir})
  run(${mpirun} ${WORK}/pc/dist_program ${WORK}/mpi-pc 3)
  run(${mpirun} ${WORK}/pc/dist_program ${WORK}/mpi-pc 6)

  # 4. MPI from C and Fortran (cairn/dist.h, use cairn_dist), where cairn was built with them:
  # examples/heat_mpi.c, heat_mpi.f90 and step8_mpi.c built with find_package (mpi_bindings/) and with
  # the MPI compiler wrappers and pkg-config, each heat run at 2 ranks twice (the second resumes), C's
  # and Fortran's checksums equal.
  file(GLOB_RECURSE dist_mod ${prefix}/*/cairn_dist.mod)
  get_filename_component(mpi_bin ${MPICXX} DIRECTORY)
  find_program(MPICC NAMES mpicc HINTS ${mpi_bin} NO_CACHE)
  find_program(MPIFC NAMES mpif90 mpifort HINTS ${mpi_bin} NO_CACHE)
  find_program(FC NAMES gfortran NO_CACHE)
  if(dist_mod AND MPICC AND MPIFC AND FC)
    get_filename_component(moddir ${dist_mod} DIRECTORY)
    run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/mpi_bindings -B ${WORK}/mpi-bindings -G Ninja
        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_Fortran_COMPILER=${FC}
        "-DCMAKE_C_FLAGS=${FLAGS}" "-DCMAKE_Fortran_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
    run(${CMAKE_COMMAND} --build ${WORK}/mpi-bindings)
    execute_process(COMMAND pkg-config --cflags --libs cairn-dist OUTPUT_VARIABLE pkg OUTPUT_STRIP_TRAILING_WHITESPACE)
    separate_arguments(pkg_list UNIX_COMMAND "${pkg}")
    run(${MPICC} -std=c11 ${flag_list} ${SOURCE_DIR}/examples/heat_mpi.c -o ${WORK}/pc/heat_mpi_c ${pkg_list}
        -Wl,-rpath,${libdir})
    run(${MPIFC} ${flag_list} -I${moddir} ${SOURCE_DIR}/examples/heat_mpi.f90 -o ${WORK}/pc/heat_mpi_f
        -lcairn_dist_fortran -lcairn_fortran ${pkg_list} -lstdc++ -Wl,-rpath,${libdir})
    set(sums "")
    foreach(prog mpi-bindings/heat_mpi_c mpi-bindings/heat_mpi_f pc/heat_mpi_c pc/heat_mpi_f)
      string(REPLACE "/" "-" dir ${prog})
      foreach(steps 12 30)
        execute_process(COMMAND ${CMAKE_COMMAND} -E env CAIRN_POOL_DIR=${WORK}/pools-${dir} OMPI_ALLOW_RUN_AS_ROOT=1
                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
                                ASAN_OPTIONS=detect_leaks=0 ${MPIEXEC} -n 2 ${WORK}/${prog} ${steps}
                        RESULT_VARIABLE rc OUTPUT_VARIABLE out
                        ERROR_VARIABLE err)
        if(NOT rc EQUAL 0 OR NOT out MATCHES "iterations ([0-9]+)\\.\\.${steps}, checksum *([^ \n]+)")
          message(FATAL_ERROR "install_test: ${prog} ${steps} failed (${rc}):\n${out}\n${err}")
        endif()
        message("${out}")
      endforeach()
      if(NOT CMAKE_MATCH_1 STREQUAL "12")
        message(FATAL_ERROR "install_test: ${prog} did not resume at step 12:\n${out}")
      endif()
      string(TOLOWER ${CMAKE_MATCH_2} sum)
      list(APPEND sums ${sum})
    endforeach()
    list(REMOVE_DUPLICATES sums)
    list(LENGTH sums n)
    if(NOT n EQUAL 1)
      message(FATAL_ERROR "install_test: the C and Fortran MPI heat loops' checksums differ: ${sums}")
    endif()
    # Step 8 in C under the installed `cairn launch`: rank 1 dies after step 23, the relaunch resumes.
    run(${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0
        CAIRN_POOL_DIR=${WORK}/step8-c ${prefix}/bin/cairn launch -n 2 -- ${WORK}/mpi-bindings/step8_mpi_c)
    # And step 8 in C++, built with examples/ (find_package), the same way.
    run(${CMAKE_COMMAND} --build ${WORK}/cmake-build --target step8_mpi)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                            ASAN_OPTIONS=detect_leaks=0 CAIRN_POOL_DIR=${WORK}/step8-cpp ${prefix}/bin/cairn launch -n 2
                            -- ${WORK}/cmake-build/step8_mpi
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "resumed at step 23 of 60.*equals")
      message(FATAL_ERROR "install_test: step8_mpi under the installed `cairn launch` (${rc}):\n${out}\n${err}")
    endif()
  else()
    message("install_test: no C and Fortran MPI programs (cairn_dist.mod '${dist_mod}', mpicc '${MPICC}', "
            "mpif90 '${MPIFC}', gfortran '${FC}')")
  endif()
endif()
clear_work()
