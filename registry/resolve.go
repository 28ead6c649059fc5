package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/schema"
)

// maxReferenceDepth bounds how deep references nest: far beyond any real
// schema, and a bound on the requests a broken registry can cost.
const maxReferenceDepth = 16

// subjectVersion names one registered schema; version -1 is the latest.
type subjectVersion struct {
	subject string
	version int
}

func (sv subjectVersion) String() string {
	if sv.version == -1 {
		return sv.subject + "@latest"
	}
	return sv.subject + "@" + strconv.Itoa(sv.version)
}

// version fetches one subject version: nil, *notFoundError (40401, 40402),
// or call's errors.
func (c *Client) version(ctx context.Context, sv subjectVersion, a asker) (sr.SubjectSchema, error) {
	v := "latest"
	if sv.version != -1 {
		v = strconv.Itoa(sv.version)
	}
	var got sr.SubjectSchema
	err := c.call(ctx, request{
		path:     "/subjects/" + url.PathEscape(sv.subject) + "/versions/" + v,
		notFound: []int{sr.ErrSubjectNotFound.Code, sr.ErrVersionNotFound.Code},
		asker:    a,
		do: func(ctx context.Context, cl *sr.Client) (err error) {
			got, err = cl.SchemaByVersion(ctx, sv.subject, sv.version)
			if err == nil && got.Schema.Schema == "" {
				err = errNoText
			}
			return err
		},
	})
	return got, err
}

// resolve fetches refs and their references, depth first: each reference
// once by name, after its own references. memo holds the subject versions
// fetched already (they are kept across a fetch's retries). An
// *unresolvableError says the schema cannot be compiled; other errors are
// worth a retry.
func (c *Client) resolve(ctx context.Context, refs []sr.SchemaReference, memo map[subjectVersion]sr.SubjectSchema, a asker) ([]schema.Reference, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	r := &resolver{
		c: c,
		// A soft-deleted version still decodes the records written with
		// it, as Confluent's deserializers read it (lookupDeletedSchema).
		ctx:   sr.WithParams(ctx, sr.ShowDeleted),
		memo:  memo,
		asker: a,
		seen:  map[string]subjectVersion{},
	}
	if err := r.add(refs); err != nil {
		return nil, err
	}
	return r.out, nil
}

type resolver struct {
	c     *Client
	ctx   context.Context
	memo  map[subjectVersion]sr.SubjectSchema
	asker asker
	seen  map[string]subjectVersion // names resolved, and to what
	path  []subjectVersion          // the references being resolved, outermost first
	out   []schema.Reference
}

func (r *resolver) add(refs []sr.SchemaReference) error {
	for _, ref := range refs {
		sv := subjectVersion{subject: ref.Subject, version: ref.Version}
		if had, ok := r.seen[ref.Name]; ok {
			if had != sv {
				// Compile knows a reference by its name only.
				r.c.o.Logger.Warn("two schema references share a name: the first one resolved is used",
					append(slices.Clip(r.asker.attrs), "name", ref.Name, "used", had.String(), "ignored", sv.String())...)
			}
			continue
		}
		unresolvable := func(reason string, err error) error {
			return &unresolvableError{name: ref.Name, subject: ref.Subject, version: ref.Version, reason: reason, err: err}
		}
		switch {
		case ref.Name == "" || ref.Subject == "":
			return unresolvable("the reference has no name or no subject", nil)
		case slices.Contains(r.path, sv):
			return unresolvable("it refers back to a schema that refers to it (a cycle)", nil)
		case len(r.path) >= maxReferenceDepth:
			return unresolvable(fmt.Sprintf("references nest deeper than %d", maxReferenceDepth), nil)
		}
		ss, ok := r.memo[sv]
		if !ok {
			var err error
			ss, err = r.c.version(r.ctx, sv, r.asker)
			var nf *notFoundError
			if errors.As(err, &nf) {
				return unresolvable("the registry does not have it", err)
			}
			if err != nil {
				return err
			}
			r.memo[sv] = ss
		}
		r.path = append(r.path, sv)
		if err := r.add(ss.References); err != nil {
			return err
		}
		r.path = r.path[:len(r.path)-1]
		r.seen[ref.Name] = sv
		r.out = append(r.out, schema.Reference{Name: ref.Name, Text: ss.Schema.Schema})
	}
	return nil
}
