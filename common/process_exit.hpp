// defines: common::note_loaded_objects, common::end_process (a program's exit without its
//          teardown, where nothing needs that teardown)
#pragma once

namespace common {

/// @brief Counts the shared objects loaded now (the program and the libraries the loader mapped at
/// start): end_process compares with it. Call first thing in main.
void note_loaded_objects();

/// @brief Ends the process with `code` once stdout and stderr are flushed. Without its teardown -
/// no static or thread_local destructors, no atexit handlers (`_exit`) - the kernel takes the
/// memory back whole, as compilers end (clang's -disable-free): the caches a command filled were
/// freed block by block before, 0.5 ms of a ~2 ms exit of `tune` (docs/benchmarks.md). A normal
/// `std::exit` instead where the teardown may matter: a shared object was loaded since
/// note_loaded_objects (a plug-in - CUDA, MPI - OpenBLAS or SQLite, whose exit handlers run), or a
/// sanitizer build (LeakSanitizer checks at exit), or note_loaded_objects was not called.
[[noreturn]] void end_process(int code);

/// @brief Whether end_process would skip the teardown now (tests).
bool fast_exit_allowed();

}  // namespace common
