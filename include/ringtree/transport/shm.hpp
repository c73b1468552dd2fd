#pragma once
// shm_transport: processes on one host exchanging messages through one POSIX
// shared-memory segment per communicator. This is the header to include; it
// gathers the pieces under shm/, one concern each: the segment's layout
// (layout.hpp), the options (options.hpp), what the launcher's environment
// tells a rank (bootstrap.hpp: job identity, rank and size), the segment's
// lifetime (segment.hpp), the futex doorbells (futex.hpp), the message
// protocol slot_transport<Slots> (slots.hpp), and the host slot policy
// with shm_transport itself (host_slots.hpp).
#include <ringtree/transport/shm/bootstrap.hpp>
#include <ringtree/transport/shm/futex.hpp>
#include <ringtree/transport/shm/host_slots.hpp>
#include <ringtree/transport/shm/layout.hpp>
#include <ringtree/transport/shm/options.hpp>
#include <ringtree/transport/shm/segment.hpp>
#include <ringtree/transport/shm/slots.hpp>
