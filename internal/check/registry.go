package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"dedup/key"
	"dedup/registry"
	"dedup/schema"
)

// registryCheck names the line on reaching the registry and reading the
// subject. Each schema-framed part gets a line of its own, named
// "key <part>", so that the verdict names the part that fails.
const registryCheck = "schema registry"

// checkRegistry: with a schema-framed DEDUP_KEY, the registry answers with
// the stage's URLs, credentials and TLS, and the latest schema of
// SCHEMA_REGISTRY_SUBJECT is of the format each part reads and has its
// path, as a scalar. The stage reads each record by its own schema id; the
// latest schema stands for what the producers write now.
func (c *checker) checkRegistry(ctx context.Context) {
	ks, err := key.Parse(c.cfg.Key)
	if err != nil || !ks.Schemas() {
		return // a bad DEDUP_KEY is a configuration error, reported before
	}
	urls := strings.Join(c.cfg.RegistryURLs(), ",")
	client, err := c.cfg.Registry(c.log)
	if err != nil {
		c.report(checkFail, registryCheck, "%v", err)
		return
	}
	defer client.Close()
	subject := c.cfg.RegistrySubject
	cctx, cancel := c.step(ctx)
	defer cancel()
	s, err := client.Latest(cctx, subject)
	switch {
	case err != nil && cctx.Err() != nil && ctx.Err() == nil:
		c.report(checkFail, registryCheck, "no answer from SCHEMA_REGISTRY_URL=%s within %v", urls, c.timeout)
		return
	case err != nil:
		c.report(checkFail, registryCheck, "%s", registryError(err, subject, urls))
		return
	}
	c.report(checkOK, registryCheck, "subject %s: latest schema id %d, %s (SCHEMA_REGISTRY_URL=%s)", subject, s.ID, s.Format, urls)
	for _, p := range ks.SchemaParts() {
		c.checkSchemaPart(p, subject, s)
	}
}

// registryError says what an error of Latest means for the operator.
func registryError(err error, subject, urls string) string {
	var ue *registry.UnavailableError
	var ae *registry.AuthError
	switch {
	case errors.As(err, &ue):
		return fmt.Sprintf("unreachable: no URL of SCHEMA_REGISTRY_URL=%s answered: %v", urls, ue)
	case errors.As(err, &ae):
		return ae.Error() // names SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD
	case errors.Is(err, registry.ErrSubjectNotFound):
		return fmt.Sprintf("subject %q not found at %s: the check reads the latest schema of SCHEMA_REGISTRY_SUBJECT, by default <INPUT_TOPIC>-value (the serializers' TopicNameStrategy); set it when the producers use another subject naming strategy (the record's full name, or <topic>-<record>)",
			subject, urls)
	case errors.Is(err, registry.ErrUnresolvableReference):
		return fmt.Sprintf("subject %q: its latest schema has a reference the registry cannot resolve, so its records would be unkeyed (unknown_schema): %v", subject, err)
	}
	return err.Error()
}

// schemaFormats is, per format, the DEDUP_KEY prefix that reads it and
// what is not a scalar in it.
var schemaFormats = map[registry.Format]struct{ prefix, containers string }{
	registry.Avro:     {"avro:", "a record, an array or a map"},
	registry.Protobuf: {"protobuf:", "a message, a repeated field or a map"},
	registry.JSON:     {"jsonschema:", "an object or an array"},
}

// checkSchemaPart: the latest schema s of subject has p's path, as a
// scalar, in the format p reads.
func (c *checker) checkSchemaPart(p key.SchemaPart, subject string, s *registry.Schema) {
	name := "key " + p.Spec
	path := strings.Join(p.Path, ".")
	if p.Format != s.Format {
		c.report(checkFail, name, "subject %s holds a %s schema (id %d), not %s: every record would be unkeyed (undecodable); %s values are read by %s%s",
			subject, s.Format, s.ID, p.Format, s.Format, schemaFormats[s.Format].prefix, path)
		return
	}
	where := fmt.Sprintf("schema id %d (%s), the latest of subject %s", s.ID, s.Format, subject)
	var st schema.Status
	var err error
	switch p.Format {
	case registry.Avro:
		var plan schema.Plan
		if plan, err = schema.CompileAvro(s.Text, s.References, p.Path); err == nil {
			st = plan.Static()
		}
	case registry.Protobuf:
		// Static reads the file's first message: the one a serializer
		// registers under the default subject.
		where = "the first message of " + where
		var plan schema.Plan
		if plan, err = schema.CompileProtobuf(s.Text, s.References, p.Path); err == nil {
			st = plan.Static()
		}
	case registry.JSON:
		st = schema.CheckJSONPath(s.Text, s.References, p.Path)
	}
	switch {
	case err != nil:
		c.report(checkFail, name, "%s does not compile, so every record would be unkeyed (undecodable): %v", where, err)
	case st == schema.Found:
		c.report(checkOK, name, "%s is a scalar in %s", path, where)
	case st == schema.NotScalar:
		c.report(checkFail, name, "%s is not a scalar (%s) in %s: records would be unkeyed (not_scalar); name a scalar field inside it",
			path, schemaFormats[p.Format].containers, where)
	case st == schema.Undecodable:
		c.report(checkFail, name, "%s is not JSON, so every record would be unkeyed (undecodable)", where)
	default:
		c.report(checkFail, name, "%s: no such field (or one only ever null) in %s: records would be unkeyed (missing_field); correct the path, or SCHEMA_REGISTRY_SUBJECT if the producers write another subject",
			path, where)
	}
}
