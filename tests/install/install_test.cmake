# install_test.cmake — installs the build into a scratch prefix and builds
# examples/ out of the tree against it, both ways a user would: CMake's
# find_package(cairn CONFIG) and pkg-config; then runs what it built (a C++
# and a C program each way, against the shared library). cmake -P, with
#   -DBUILD_DIR=<cairn build> -DSOURCE_DIR=<cairn source> -DWORK=<scratch dir>
#   -DCC=<C compiler> -DCXX=<C++ compiler> -DFLAGS=<sanitizer flags or "">
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

file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/cairn/persist.hpp include/cairn/cairn.h include/cairn/extended/pool.hpp bin/cairn)
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
run(${CMAKE_COMMAND} --build ${WORK}/cmake-build --target step2_resilient_loop step2_resilient_loop_c)
run(${env} ${WORK}/cmake-build/step2_resilient_loop)
run(${env} ${WORK}/cmake-build/step2_resilient_loop_c)

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
file(REMOVE_RECURSE ${WORK})
