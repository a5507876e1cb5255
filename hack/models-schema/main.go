// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command models-schema prints the OpenAPI v2 models of the generated
// pkg/generated/openapi definitions as JSON. hack/update-codegen.sh feeds them
// to applyconfiguration-gen, which needs them to generate the Extract
// functions and the type converter that lets the fake clientset serve Apply.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/vidra-operator/vidra/pkg/generated/openapi"
)

func main() {
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + util.ToRESTFriendlyName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(ref)
	models := make(map[string]spec.Schema, len(defs))
	for name, def := range defs {
		schema := def.Schema
		// Types that embed a hand-written v2 schema carry it in an extension;
		// applyconfiguration-gen reads v2 only.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schema = v2
		}
		models[util.ToRESTFriendlyName(name)] = schema
	}
	data, err := json.Marshal(&spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Vidra", Version: "unversioned"}},
		Definitions: models,
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "models-schema:", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.Write(data)
}
