// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import "time"

// The limits of what remote clients read of one answer. A tenant chooses the
// server, which may be their own: without them, one 200 MiB answer read whole
// took the heap to 2.5 GiB, ten times the operator's memory limit. An answer
// over its limit fails the request and opens the server's circuit breaker:
// a server that sends them is not one to keep reading from. An answer over
// a bound that depends on what Vidra asked for or already holds (an answer
// about an object, discovery over its namespace's pool) fails its request
// only (see RefusedAnswer).
const (
	// maxAnswerBytes bounds an answer of the request clients: one object
	// (etcd refuses objects over 1.5 MiB by default, about 3 MiB as JSON at
	// most) or one discovery document (aggregated discovery of a cluster
	// with 2,500 CRDs is about 1.5 MiB). Each worker may be reading one, and
	// an answer is held two or three times over while it is decoded.
	maxAnswerBytes = 8 << 20
	// maxAnswerValues bounds the JSON values of an answer of the request
	// clients, and maxListValues those of a list, its pages together.
	// Decoded into Go maps and slices, a value costs up to 170 bytes
	// however short its text: 64 MiB of tiny values once decoded into
	// 1 GiB. 100,000 values decode into 17 MiB at most, and each worker may
	// be decoding one answer: one object (a ConfigMap is 20 to 60 values, a
	// Deployment as served about 200, etcd's largest CustomResourceDefinition
	// some 75,000) or one discovery document. 250,000 values, 42 MiB at
	// most, hold some 5,000 ConfigMaps or 1,200 Deployments, and the
	// informers of a namespace's clusters read one list at a time.
	maxAnswerValues = 100_000
	maxListValues   = 250_000
	// maxDiscoveryValues bounds a discovery document: 150,000 values
	// describe some 5,000 resources. It decodes into fixed structs, in
	// which an empty object of the text costs up to 290 bytes: 42 MiB at
	// most.
	maxDiscoveryValues = 150_000
	// maxListBytes bounds what the informers' clients read of one list, its
	// pages together: the objects of one kind that carry Vidra's labels on
	// one cluster. With maxListValues it holds some 5,000 ConfigMaps or
	// 1,200 Deployments; larger sets are more than one operator should
	// cache from a cluster it does not run in.
	maxListBytes = 16 << 20
	// maxEventBytes and maxEventValues bound one event of a watch stream,
	// which holds one object: etcd's largest is about 3 MiB as JSON.
	maxEventBytes  = 4 << 20
	maxEventValues = 100_000
	// retainedEventBytes is the largest event after which a watch stream
	// goes on. client-go's decoders keep buffers of about twice the largest
	// event a stream carried for as long as it lasts: twenty watches that
	// each carried one 3.9 MiB event held 174 MiB, and a server can send
	// events that cache nothing (a delete of a name it never sent). After a
	// larger event the stream ends, cleanly, and its buffers go with it;
	// the informer watches again from that event on.
	retainedEventBytes = 64 << 10
	// maxWatchPoolBytes bounds the bytes the watch streams of one
	// namespace's remote clusters hold at once: the event each is reading,
	// the largest each keeps a buffer for, and watchStreamBytes each. A
	// server can trickle an event, and a tenant chooses how many kinds its
	// clusters watch. client-go's buffers take up to about twice the count.
	maxWatchPoolBytes = 16 << 20
	// watchEventRate and watchEventBurst bound how fast the watch streams
	// of one namespace's remote clusters are read, in events per second:
	// an event counts one, and one more for every eventUnitBytes of its
	// text, since decoding costs by the byte. One tenant's server streaming
	// 42,000 small events a second into one watch took 1.4 of the
	// operator's cores from every other tenant. A namespace's clusters get
	// 1,000 a second, 10,000 at once: a thousand Deployments of some 5 KiB
	// each, rolling out together, send fewer. Past that a stream is read
	// no faster, and the server's writes wait on the connection.
	watchEventRate  = 1000
	watchEventBurst = 10_000
	eventUnitBytes  = 1 << 10
	// watchStreamBytes is what an open watch stream is counted for in its
	// namespace's pool besides its events: its decoders, goroutines and
	// HTTP/2 stream. With maxWatchPoolBytes, at most 1,024 watches of one
	// namespace's remote clusters are open at once.
	watchStreamBytes = 16 << 10
	// maxDiscoveryValuesPerNamespace bounds the JSON values of the
	// discovery documents the RESTMappers of one namespace's remote
	// clusters hold together, each cluster counted by the latest answer for
	// each discovery path. A mapper keeps every resource a cluster serves,
	// some 2 KiB each once mapped: five clusters of a tenant's server, each
	// serving 28,000 resources in 140,000 values, held 309 MiB. 150,000
	// values are two clusters of 2,500 CRDs each.
	maxDiscoveryValuesPerNamespace = 150_000
	// informerRequestTimeout bounds the requests of the informers' clients
	// that are not watches (their lists): those clients have no timeout, as
	// a watch is one long request, and a list trickling in must not hold
	// its informer forever.
	informerRequestTimeout = 2 * time.Minute
)

// answerLimits bounds what one client reads of a server's answers.
type answerLimits struct {
	// answer and values bound a successful answer that is not a watch's, in
	// bytes and in JSON values; error answers are cut at maxErrorBody.
	answer, values int64
	// event and eventValues bound one event of a watch stream; a stream
	// ends after an event over retain (see retainedEventBytes).
	event, eventValues, retain int64
	// aboutObjects bounds answers about an object by the object (see
	// AnswersAbout).
	aboutObjects bool
	// discovery says that the answers are discovery documents, whatever
	// their path (a server's URL may have one, and a redirect leads
	// anywhere): the RESTMapper keeps them.
	discovery bool
	// lists says that the answers are lists, whose pages (requests with a
	// continue token) are bounded together, as one answer: client-go's
	// pager holds them all before anything reads them.
	lists bool
	// timeout bounds a request that is not a watch, 0 for none (the
	// client's own timeout applies).
	timeout time.Duration
}
