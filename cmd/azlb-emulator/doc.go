// Command azlb-emulator serves the ARM + AAD emulator of
// internal/emulator on a local port, and replays recorded ARM exchanges
// against an emulator ("azlb-emulator replay CASSETTE...").
//
// See docs/emulator.md for flags, the default identity and the control API.
package main
