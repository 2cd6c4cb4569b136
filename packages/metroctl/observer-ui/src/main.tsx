/**
 * The observer's page: a hash router over the cluster, node and consensus
 * views, all fed by one cluster stream (and a node's own streams in its
 * view).
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ClusterView } from "./cluster-view";
import { useClusterState } from "./cluster-state";
import { ConsensusView } from "./consensus-view";
import { NodeView } from "./node-view";
import { token } from "./observer-api";
import "./styles.css";

function useRoute(): string {
  const [route, setRoute] = useState(location.hash.replace(/^#/, "") || "/");
  useEffect(() => {
    const onChange = () => setRoute(location.hash.replace(/^#/, "") || "/");
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

function App() {
  const route = useRoute();
  const cluster = useClusterState();
  const node = /^\/node\/(metropolis-[0-9a-f]+)$/.exec(route);
  let view;
  if (node) view = <NodeView id={node[1]} cluster={cluster} />;
  else if (route === "/consensus") view = <ConsensusView cluster={cluster} />;
  else view = <ClusterView cluster={cluster} />;
  return (
    <>
      <header>
        <h1>Metropolis observer</h1>
        <nav>
          <a href="#/" class={node || route === "/consensus" ? "" : "active"}>
            Cluster
          </a>
          <a href="#/consensus" class={route === "/consensus" ? "active" : ""}>
            Consensus
          </a>
        </nav>
      </header>
      <main>{view}</main>
    </>
  );
}

const root = document.getElementById("app");
if (root) {
  if (token === "") {
    render(
      <p class="banner failed">No observer token: open the URL that `metroctl observe` printed.</p>,
      root,
    );
  } else {
    render(<App />, root);
  }
}
