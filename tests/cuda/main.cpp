// doctest runner of test_cuda (the CUDA backend's parts that need no GPU; built when SLICETUNE_CUDA).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
