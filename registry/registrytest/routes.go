package registrytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"
)

// The Confluent error codes the server answers with.
const (
	codeSubjectNotFound = 40401
	codeVersionNotFound = 40402
	codeSchemaNotFound  = 40403
	codeInvalidSchema   = 42201
	codeInvalidVersion  = 42202
)

// schemaBody is GET /schemas/ids/{id}: schemaType and references are
// omitted when they are AVRO and none, as the Confluent registry does.
type schemaBody struct {
	Schema     string               `json:"schema"`
	SchemaType string               `json:"schemaType,omitempty"`
	References []sr.SchemaReference `json:"references,omitempty"`
}

// subjectSchemaBody is GET /subjects/{subject}/versions/{version}.
type subjectSchemaBody struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	schemaBody
}

func body(sch sr.Schema) schemaBody {
	b := schemaBody{Schema: sch.Schema, References: sch.References}
	if sch.Type != sr.TypeAvro {
		b.SchemaType = sch.Type.String()
	}
	return b
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /schemas/ids/{id}", s.schemaByID)
	mux.HandleFunc("GET /schemas/ids/{id}/schema", s.schemaTextByID)
	mux.HandleFunc("GET /schemas/ids/{id}/versions", s.versionsByID)
	mux.HandleFunc("GET /subjects", s.listSubjects)
	mux.HandleFunc("GET /subjects/{subject}/versions", s.listVersions)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", s.subjectVersion)
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}/schema", s.subjectVersionText)
	mux.HandleFunc("POST /subjects/{subject}/versions", s.register)
	mux.HandleFunc("POST /subjects/{subject}", s.lookup)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Jersey's answer to a path the registry does not serve.
		writeError(w, http.StatusNotFound, http.StatusNotFound, "HTTP 404 Not Found")
	})
	return mux
}

// byID is the schema with the id in the path; it answers 40403 itself.
func (s *Server) byID(w http.ResponseWriter, r *http.Request) (stored, int, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || id < 1 || id > len(s.schemas) {
		writeError(w, http.StatusNotFound, codeSchemaNotFound, "Schema "+r.PathValue("id")+" not found")
		return stored{}, 0, false
	}
	return s.schemas[id-1], id, true
}

func (s *Server) schemaByID(w http.ResponseWriter, r *http.Request) {
	if st, _, ok := s.byID(w, r); ok {
		writeJSON(w, http.StatusOK, body(st.schema))
	}
}

func (s *Server) schemaTextByID(w http.ResponseWriter, r *http.Request) {
	if st, _, ok := s.byID(w, r); ok {
		w.Header().Set("Content-Type", ContentType)
		w.Write([]byte(st.schema.Schema))
	}
}

func (s *Server) versionsByID(w http.ResponseWriter, r *http.Request) {
	st, id, ok := s.byID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	live := []sr.SubjectVersion{}
	for _, sv := range st.versions {
		// A deleted subject, or one deleted and registered again, no
		// longer holds the id at that version.
		if got, ok := s.versionLocked(sv.Subject, sv.Version); ok && got == id {
			live = append(live, sv)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, live)
}

func (s *Server) listSubjects(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	subjects := make([]string, 0, len(s.subjects))
	for sub := range s.subjects {
		subjects = append(subjects, sub)
	}
	s.mu.Unlock()
	sort.Strings(subjects)
	writeJSON(w, http.StatusOK, subjects)
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.mu.Lock()
	ids, ok := s.subjects[subject]
	n := len(ids)
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, codeSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
		return
	}
	versions := make([]int, n)
	for i := range versions {
		versions[i] = i + 1
	}
	writeJSON(w, http.StatusOK, versions)
}

// version is the subject version in the path; it answers the errors itself.
func (s *Server) version(w http.ResponseWriter, r *http.Request) (subjectSchemaBody, bool) {
	subject, v := r.PathValue("subject"), r.PathValue("version")
	version := -1
	if v != "latest" {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || n < -1 {
			writeError(w, http.StatusUnprocessableEntity, codeInvalidVersion,
				fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v))
			return subjectSchemaBody{}, false
		}
		version = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	versions, ok := s.subjects[subject]
	if !ok {
		writeError(w, http.StatusNotFound, codeSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
		return subjectSchemaBody{}, false
	}
	id, ok := s.versionLocked(subject, version)
	if !ok {
		writeError(w, http.StatusNotFound, codeVersionNotFound, fmt.Sprintf("Version %s not found.", v))
		return subjectSchemaBody{}, false
	}
	if version == -1 {
		version = len(versions)
	}
	return subjectSchemaBody{Subject: subject, Version: version, ID: id, schemaBody: body(s.schemas[id-1].schema)}, true
}

func (s *Server) subjectVersion(w http.ResponseWriter, r *http.Request) {
	if b, ok := s.version(w, r); ok {
		writeJSON(w, http.StatusOK, b)
	}
}

func (s *Server) subjectVersionText(w http.ResponseWriter, r *http.Request) {
	if b, ok := s.version(w, r); ok {
		w.Header().Set("Content-Type", ContentType)
		w.Write([]byte(b.Schema))
	}
}

// decode reads a schema from a request body; it answers the errors itself.
func decode(w http.ResponseWriter, r *http.Request) (sr.Schema, bool) {
	var in struct {
		Schema     string               `json:"schema"`
		SchemaType string               `json:"schemaType"`
		References []sr.SchemaReference `json:"references"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidSchema, "Invalid schema: "+err.Error())
		return sr.Schema{}, false
	}
	var typ sr.SchemaType
	if err := typ.UnmarshalText([]byte(in.SchemaType)); err != nil {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidSchema, "Invalid schema type "+in.SchemaType)
		return sr.Schema{}, false
	}
	return sr.Schema{Schema: in.Schema, Type: typ, References: in.References}, true
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	sch, ok := decode(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	id, err := s.registerLocked(r.PathValue("subject"), sch)
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidSchema, "Invalid schema: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"id": id})
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	sch, ok := decode(w, r)
	if !ok {
		return
	}
	subject := r.PathValue("subject")
	s.mu.Lock()
	defer s.mu.Unlock()
	versions, ok := s.subjects[subject]
	if !ok {
		writeError(w, http.StatusNotFound, codeSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
		return
	}
	id, ok := s.byKey[key(sch)]
	i := slices.Index(versions, id)
	if !ok || i < 0 {
		writeError(w, http.StatusNotFound, codeSchemaNotFound, "Schema not found")
		return
	}
	writeJSON(w, http.StatusOK, subjectSchemaBody{Subject: subject, Version: i + 1, ID: id, schemaBody: body(s.schemas[id-1].schema)})
}
