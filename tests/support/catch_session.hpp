#pragma once

// Catch2's command-line session (catch_session.cpp: Catch's implementation, compiled once for
// every test executable). Returns the session's exit status.
int run_catch_session(int argc, char* argv[]);
