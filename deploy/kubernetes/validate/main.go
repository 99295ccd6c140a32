// Command validate checks the Kubernetes manifests of deploy/kubernetes
// and deploy/kubernetes-sentinel offline, without a cluster: every document must decode strictly (no
// unknown or duplicate fields, values of the right types) into the
// Kubernetes API types of its kind (k8s.io/api, the version of kubectl 1.32).
//
//	cd deploy/kubernetes/validate && go run . ../masters.yaml ../proxy.yaml
//	go run . ../../kubernetes-sentinel/{voters,sentinels,backend,proxy}.yaml
//
// It is a module of its own so that the proxy does not depend on the
// Kubernetes libraries.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	failed := false
	for _, path := range os.Args[1:] {
		raw, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: document %d: %v\n", path, i, err)
				failed = true
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: document %d: %v\n", path, i, err)
				failed = true
				continue
			}
			fmt.Printf("%s: %s %s: ok\n", path, gvk.Kind, name(obj))
		}
	}
	if failed {
		os.Exit(1)
	}
}

func name(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return "?"
}
