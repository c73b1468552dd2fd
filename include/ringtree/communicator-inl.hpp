#pragma once
// The communicator's members' bodies, each concern in its piece. Included by
// communicator.hpp except with RINGTREE_PREBUILT (core/compiled.hpp), where a
// file that makes a communicator over a transport the prebuilt part does not
// cover (a test's faulty transport, a transport of its own) includes it.
#include <ringtree/communicator.hpp>
#include <ringtree/communicator/dispatch.hpp>
#include <ringtree/communicator/collectives.hpp>
#include <ringtree/communicator/open.hpp>
