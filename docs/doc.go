// Package docs holds the project's documentation pages (Markdown, beside this
// file). It has no code; its tests keep the README and the pages honest: the
// README stays short and documents every name of the outside interface, every
// relative link resolves, every alert has a runbook entry, and no page refers
// to anything outside the repository or narrates its own history.
package docs
