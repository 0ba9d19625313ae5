// Ctrl-C and SIGTERM as `gpuleak watch` and `gpuleak attach` take them: noticed between two steps, which
// then end what the command does (the last frame, the report). A second one, while a long step runs,
// ends the launcher at once, as the default action would.
#pragma once

namespace gpuleak::launcher {

// From now on SIGINT and SIGTERM set the flag that interrupted() reads, once each.
void notice_interruptions();

// Whether SIGINT or SIGTERM came since notice_interruptions().
bool interrupted();

} // namespace gpuleak::launcher
