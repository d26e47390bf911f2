package helm

import (
	"os"

	"sigs.k8s.io/yaml"
)

func yamlUnmarshalFile(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, into)
}
