// Package urlquery reads the query of a queue URL for every part of the
// module that takes one: queue.Open, the memory:// opener, the sqlqueue
// registrations (sqlite://, postgres://, mysql://) and the meridian
// command's --dsn.
//
// # Why not url.URL.Query
//
// url.URL.Query drops every parameter url.ParseQuery cannot read: a
// parameter with a ";" (table=staging;jobs) or a bad escape (table=%zz)
// simply vanishes, and the queue falls back to its default (for a table,
// meridian_jobs), so a command meant for one table acts on another.
// Values refuses such a query instead, naming the parameter, so every
// reader of a queue URL accepts and refuses the same text.
package urlquery
