# Finds every external dependency in one place. Versions are pinned by
# scripts/setup.sh (apt) and scripts/requirements.txt (pip).

# --- MLIR / LLVM 16 (Debian: llvm-16-dev libmlir-16-dev mlir-16-tools) ---
if(NOT MLIR_DIR AND EXISTS /usr/lib/llvm-16/lib/cmake/mlir)
  set(MLIR_DIR /usr/lib/llvm-16/lib/cmake/mlir)
endif()
find_package(MLIR REQUIRED CONFIG)
message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)
if(NOT LLVM_EXTERNAL_LIT AND EXISTS /usr/lib/llvm-16/build/utils/lit/lit.py)
  set(LLVM_EXTERNAL_LIT /usr/lib/llvm-16/build/utils/lit/lit.py)
endif()

# --- ONNX protobuf (Debian: libonnx-dev libprotobuf-dev) ---
find_package(Protobuf REQUIRED)   # must precede ONNX: its config does not find protobuf itself
find_package(ONNX REQUIRED CONFIG)

# --- Gloo (Debian: libgloo-dev), the CPU transport ---
find_package(Threads REQUIRED)
find_package(Gloo CONFIG QUIET)
set(VARUNA_HAVE_GLOO ${Gloo_FOUND})

# --- libtorch (PyPI torch wheel; C++20 headers) ---
# Only torch-facing targets (plain add_library, exceptions on, C++20) link it.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Torch_DIR)
  if(Python3_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import torch; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE VARUNA_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
      ERROR_QUIET RESULT_VARIABLE _torch_rc)
    if(_torch_rc EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH ${VARUNA_TORCH_PREFIX})
    endif()
  endif()
endif()
find_package(Torch QUIET)
set(VARUNA_HAVE_TORCH ${Torch_FOUND})
option(VARUNA_ENABLE_TORCHSCRIPT "Build the TorchScript importer (needs libtorch)" ON)
if(VARUNA_HAVE_TORCH AND VARUNA_ENABLE_TORCHSCRIPT)
  set(VARUNA_BUILD_TORCHSCRIPT ON)
else()
  set(VARUNA_BUILD_TORCHSCRIPT OFF)
endif()
if(VARUNA_HAVE_TORCH)
  message(STATUS "libtorch found: ${TORCH_INCLUDE_DIRS}")
else()
  message(WARNING "libtorch not found: the TorchScript importer and the runtime are not built")
endif()

# Link only the CPU parts of libtorch: the CUDA wheel's libtorch_cuda wants a newer NCCL
# than the system one at link time, and nothing of ours needs it.
function(varuna_link_torch target)
  target_link_libraries(${target} PUBLIC torch_cpu c10)
  target_include_directories(${target} SYSTEM PUBLIC ${TORCH_INCLUDE_DIRS})
  set_target_properties(${target} PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
  target_compile_options(${target} PRIVATE -fexceptions -frtti -Wno-deprecated-declarations)
endfunction()

# --- CUDA + NCCL (optional: compiled whenever found; never run here) ---
find_package(CUDAToolkit QUIET)
set(VARUNA_HAVE_NCCL OFF)
if(CUDAToolkit_FOUND)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(NCCL::nccl UNKNOWN IMPORTED)
    set_target_properties(NCCL::nccl PROPERTIES
      IMPORTED_LOCATION ${NCCL_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
    set(VARUNA_HAVE_NCCL ON)
    message(STATUS "NCCL found: ${NCCL_LIBRARY} (CUDA ${CUDAToolkit_VERSION})")
  endif()
endif()
