// Ctrl-C during a long campaign: the first SIGINT (or SIGTERM) only raises a flag; workers finish the
// case in hand, start no new one, and the command writes a report marked "partial": true and exits
// 130. A second SIGINT gets the default action (the handler is one-shot), for a user who wants out now.
#pragma once

namespace fc::report {

void install_interrupt_handler();
bool interrupted();
void clear_interrupt();   // tests
void request_interrupt(); // tests, and the same path the signal takes

}  // namespace fc::report
