package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// rootFSLayer is the layer every image shares: what a static Go binary
// needs from an operating system and nothing more.
//
//   - /etc/passwd and /etc/group name root and the nonroot user 65532 (so
//     tools that map a uid to a name, and Go's os/user, find one); its shell
//     is /sbin/nologin, which does not exist: the image has no shell.
//   - /etc/ssl/certs/ca-certificates.crt: the root certificates of Mozilla's
//     NSS trust store as the pinned golang.org/x/crypto/x509roots/fallback
//     module carries them (see caBundle).
//   - /tmp (1777) and /home/nonroot (owned by 65532), for the rare library
//     that wants them; the chart mounts an emptyDir on /tmp because the root
//     filesystem is read-only.
func rootFSLayer(mtime time.Time) (v1.Layer, error) {
	certs, n, err := caBundle()
	if err != nil {
		return nil, err
	}
	if n < 100 {
		return nil, fmt.Errorf("CA bundle has only %d certificates", n)
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	return tarLayer(mtime, []tarEntry{
		{path: "etc/", dir: true, mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/ssl/", dir: true, mode: 0o755},
		{path: "etc/ssl/certs/", dir: true, mode: 0o755},
		{path: strings.TrimPrefix(CACertsFile, "/"), mode: 0o644, data: certs},
		{path: "home/", dir: true, mode: 0o755},
		{path: "home/nonroot/", dir: true, mode: 0o700, uid: NonRootUID, gid: NonRootUID},
		{path: "root/", dir: true, mode: 0o700},
		{path: "tmp/", dir: true, mode: 0o1777},
	})
}

// caBundle is the PEM bundle of the NSS roots in the pinned
// golang.org/x/crypto/x509roots/fallback module: the same set on every build
// machine, reviewed when the module is upgraded (make update-dependencies).
// A root that NSS trusts only with a constraint X.509 cannot express (a
// distrust-after date) is left out: a PEM file cannot carry the
// constraint, and trusting the root without it would trust more than NSS
// does.
func caBundle() ([]byte, int, error) {
	var b strings.Builder
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		c, err := x509.ParseCertificate(r.Certificate)
		if err != nil {
			return nil, 0, fmt.Errorf("CA bundle: %w", err)
		}
		fmt.Fprintf(&b, "# %s\n", c.Subject)
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, 0, err
		}
		n++
	}
	return []byte(b.String()), n, nil
}
