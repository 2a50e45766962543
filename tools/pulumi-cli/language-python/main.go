// Command pulumi-language-python is the Python language host the pulumi CLI
// starts for projects whose Pulumi.yaml says `runtime: python`.
//
// Pulumi publishes its own host as a Go module without tags, which the module
// proxy we can reach does not serve, so this is a small host of ours built
// against the same release's sdk/v3. It implements what `preview`, `up`,
// `refresh` and `destroy` need: it runs the program through the release's
// pulumi-language-python-exec script with the project's interpreter. Plugin
// discovery is deliberately empty: the only plugin our programs use is the
// dynamic-provider plugin that ships beside the CLI, and nothing may download.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// version is set at build time to the pinned Pulumi release.
var version = "0.0.0-dev"

// engineCheckInterval is how often the host asks whether the engine still
// runs: a `pulumi up` killed with SIGKILL cannot stop its plugins, and the host
// must not outlive it (Pulumi's own host asks every 5 minutes).
const engineCheckInterval = 10 * time.Second

// bailExitCode is what the exec script returns after it has already shown the
// user an actionable message; the engine must not print a second error.
const bailExitCode = 32

type languageHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execScript    string
}

func main() {
	// The CLI passes flags (tracing, root, ...) before the engine address;
	// only the address matters here, so unknown flags are skipped, not fatal.
	args := positionalArgs(os.Args[1:])
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "pulumi-language-python: missing engine address argument")
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: cannot locate itself: %v\n", err)
		os.Exit(1)
	}
	host := &languageHost{
		engineAddress: args[0],
		execScript:    filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"),
	}
	engineGone, stop := context.WithCancel(context.Background())
	if err := rpcutil.Healthcheck(engineGone, host.engineAddress, engineCheckInterval, stop); err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: cannot watch the engine: %v\n", err)
		os.Exit(1)
	}
	stopServing := make(chan bool)
	go func() {
		<-engineGone.Done()
		close(stopServing)
	}()
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stopServing,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
		Options: rpcutil.OpenTracingServerInterceptorOptions(nil),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: cannot serve: %v\n", err)
		os.Exit(1)
	}
	// The engine reads the port from our first line of output.
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
		os.Exit(1)
	}
}

// positionalArgs drops `-flag`, `-flag=value` and `-flag value` forms.
func positionalArgs(argv []string) []string {
	valueFlags := map[string]bool{"tracing": true, "root": true, "virtualenv": true,
		"toolchain": true, "typechecker": true}
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && valueFlags[name] {
			i++
		}
	}
	return out
}

func (h *languageHost) Handshake(
	ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *languageHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *languageHost) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *languageHost) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

// Run executes the program once and reports its failure, if any, to the engine.
func (h *languageHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	python, err := interpreter(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	env, err := programEnv(req)
	if err != nil {
		return nil, err
	}
	program := req.GetProgram()
	if dir := req.GetInfo().GetProgramDirectory(); dir != "" {
		program = dir
	}
	args := []string{"-u", h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--organization", req.GetOrganization(),
		"--root_directory", req.GetInfo().GetRootDirectory(),
		program,
	}
	args = append(args, req.GetArgs()...)

	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = env
	cmd.Dir = req.GetPwd()
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() == bailExitCode {
			return &pulumirpc.RunResponse{Bail: true}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("python program failed: %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// interpreter honours Pulumi.yaml's `runtime.options.virtualenv` (relative to
// the project root), then PULUMI_PYTHON_CMD, then python3 on PATH.
func interpreter(info *pulumirpc.ProgramInfo) (string, error) {
	if venv, ok := info.GetOptions().AsMap()["virtualenv"].(string); ok && venv != "" {
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(info.GetRootDirectory(), venv)
		}
		python := filepath.Join(venv, "bin", "python")
		if _, err := os.Stat(python); err != nil {
			return "", fmt.Errorf("the virtualenv %q named in Pulumi.yaml has no bin/python: "+
				"create it with `python3 -m venv %s` and install the project into it", venv, venv)
		}
		return python, nil
	}
	if cmd := os.Getenv("PULUMI_PYTHON_CMD"); cmd != "" {
		return cmd, nil
	}
	return "python3", nil
}

// programEnv passes the stack config the way the Python SDK reads it back.
func programEnv(req *pulumirpc.RunRequest) ([]string, error) {
	programConfig := req.GetConfig()
	if programConfig == nil {
		// A stack without any config: the SDK reads "null" as no mapping at all and fails with a
		// traceback instead of naming the missing key.
		programConfig = map[string]string{}
	}
	config, err := json.Marshal(programConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot encode config: %w", err)
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	keys, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, fmt.Errorf("cannot encode config secret keys: %w", err)
	}
	return append(os.Environ(),
		"PULUMI_CONFIG="+string(config),
		"PULUMI_CONFIG_SECRET_KEYS="+string(keys),
	), nil
}
