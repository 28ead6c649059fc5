// Package registry looks the writer's schema of a record up by the id in
// its Confluent wire-format frame (magic byte 0, 4-byte schema id), from a
// Schema Registry (Confluent's, or Redpanda's and Apicurio's compatible
// APIs), for the key extraction of the stage. It speaks HTTP through
// franz-go's pkg/sr client.
//
// Guarantees:
//
//   - Lookup answers from an in-memory cache without a lock or an
//     allocation: an immutable map behind an atomic pointer, replaced as a
//     whole on every change (ids are few and change rarely). Both answers
//     are cached, the schema and "no such id" (40403), since an id never
//     changes what it names. The cache is bounded in bytes (schema texts
//     and a fixed overhead per id); past the bound the oldest ids go first
//     and are fetched again when asked for.
//   - One background fetch per id, however many goroutines ask: Lookup
//     starts it and answers Pending, Wait blocks for it. The fetch does not
//     end with a caller's context: it retries outages and refused
//     credentials with a jittered, doubling back-off until the registry
//     answers or Close.
//   - References are resolved when the schema is fetched, transitively, by
//     subject and version: a schema arrives with everything it refers to,
//     dependencies first, each once. A reference the registry does not
//     have, a cycle, or nesting past maxReferenceDepth makes the id
//     NotFound, with a log line.
//   - The URLs are tried in turn, the one that answered last first, on any
//     outage (refused, timed out, dropped, 5xx): pkg/sr's own list moves
//     on only after a transport error, so the client keeps one pkg/sr
//     client per URL and walks them itself.
//   - Health says whether the registry answers, typed: *AuthError (401,
//     403) or *UnavailableError. The state changes are logged once each:
//     Warn when it starts failing, Error when it refuses the credentials,
//     Info when it answers again.
//
// Files: client.go (Client, the cache, the background fetch, Latest,
// Stats), call.go (one request over the URLs, classifying answers,
// health), resolve.go (references), options.go (Options, defaults,
// validation), errors.go. registrytest/ is a test registry.
//
// Concurrency: a Client is safe for concurrent use; Close waits for the
// background fetches.
package registry
