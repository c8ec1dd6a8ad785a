# C++20 for nvcc. CMake 3.25 knows no CUDA20 dialect for nvcc, yet it asks
# for one: with CMAKE_CXX_STANDARD_REQUIRED, a CUDA target without its own
# CUDA_STANDARD inherits the C++ standard (20, also wspipe::core's cxx_std_20)
# and wspipe::cuda requires cuda_std_20, so generation fails ("requires the
# language dialect CUDA20"). This teaches it the flag in the including scope
# and the directories made after; newer CMake knows it already, and where
# CUDA is not enabled it does nothing.
#
# Included by wspipe's CMakeLists.txt (in its top-level scope, so that every
# directory can build .cu files: tools/gpu, tests/, bench/) and by the
# installed wspipeConfig.cmake: a consumer's .cu targets that link
# wspipe::cuda need it too, and enable CUDA before find_package(wspipe) or
# add_subdirectory.
set(WSPIPE_CUDA20_VARIABLES CMAKE_CUDA_COMPILE_FEATURES CMAKE_CUDA20_COMPILE_FEATURES
    CMAKE_CUDA20_STANDARD_COMPILE_OPTION CMAKE_CUDA20_EXTENSION_COMPILE_OPTION)
if(CMAKE_CUDA_COMPILER_LOADED AND NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
endif()
